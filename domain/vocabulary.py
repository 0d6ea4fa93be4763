"""The ids the rules speak in: eras, families, resources, materials, token kinds."""

from typing import Literal, get_args

Era = Literal["baroque", "classical", "romantic"]
Family = Literal["strings", "winds", "percussion_keyboards"]
Material = Literal["wood", "metal", "animal"]
Resource = Literal["money", "inspiration", "apprentice", "instrument_card", "wood", "metal", "animal"]
Consolation = Literal["money", "inspiration"]
Spectators = Literal["public", "token"]

ERAS: tuple[Era, ...] = get_args(Era)
FAMILIES: tuple[Family, ...] = get_args(Family)
MATERIALS: tuple[Material, ...] = get_args(Material)
# Resource dicts are always written in this order, so equal gains encode to equal bytes.
RESOURCES: tuple[Resource, ...] = get_args(Resource)

# A bonus key that is not a resource: that many materials of the player's choice (Rare Strings).
MATERIAL_CHOICE = "material_choice"

CONSOLATIONS: dict[Consolation, dict[str, int]] = {
    "money": {"money": 2},
    "inspiration": {"inspiration": 1},
}

# Worker skill from which an instrument's chair bonus is doubled (rules.md §5, Doubling).
DOUBLING_SKILL = 6

RULES_VERSION = 1
