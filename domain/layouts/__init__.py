"""The layouts shipped with the package, read once at import.

The files are part of the package like its source code, so reading them here is not I/O in the sense that
`domain/` forbids: the result is fixed for a given installation, and games never depend on it after
creation (each `GameCreated` carries its whole layout).
"""

from importlib.resources import files

from domain.layout import Layout, parse_layout


def _load_builtin() -> dict[str, Layout]:
    layouts: dict[str, Layout] = {}
    for entry in sorted(files(__name__).iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml"):
            layout = parse_layout(entry.read_bytes(), source=entry.name)
            layouts[layout.name] = layout
    return layouts


BUILTIN_LAYOUTS: dict[str, Layout] = _load_builtin()
STANDARD: Layout = BUILTIN_LAYOUTS["standard"]
