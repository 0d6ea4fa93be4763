"""docs/operations.md lists every setting of `server.config.Settings`, with its real default.

The table is generated from the Settings struct (`settings_rows`): when a setting is added or a default
changes, this test fails and prints the rows to paste (then write the meaning column).
"""

from __future__ import annotations

import re
from pathlib import Path

from server import config
from server.metrics import Metrics
from server.records.projector import Lag
from server.records.status import Status
from server.web.app import create_app

ROOT = Path(__file__).resolve().parents[2]

DOC = ROOT / "docs" / "operations.md"
ROW = re.compile(r"^\| `(ORCHESTRA_[A-Z0-9_]+)` \| (`[^`]*`|unset) \| (.+) \|$")


def shown(value: object) -> str:
    """A default as the doc shows it."""
    return "unset" if value is None else f"`{value}`"


def settings_rows() -> list[tuple[str, str]]:
    """(variable, default) for every setting, in the struct's order: the table's first two columns."""
    defaults = config.Settings()
    return [
        (config.PREFIX + name.upper(), shown(getattr(defaults, name)))
        for name in config.Settings.__struct_fields__
    ]


def documented() -> list[tuple[str, str, str]]:
    text = DOC.read_text()
    table = text.split("<!-- settings:begin -->", 1)[1].split("<!-- settings:end -->", 1)[0]
    found = (ROW.match(line.strip()) for line in table.splitlines())
    return [(m.group(1), m.group(2), m.group(3)) for m in found if m is not None]


def test_the_settings_table_lists_every_setting_with_its_default_and_a_meaning() -> None:
    rows = documented()
    expected = settings_rows()
    skeleton = "\n".join(f"| `{name}` | {default} | ... |" for name, default in expected)
    assert [(name, default) for name, default, _ in rows] == expected, f"the table should be:\n{skeleton}"
    assert [name for name, _ in expected] == list(config.ENV_NAMES)
    assert all(len(meaning.strip()) > 10 for _, _, meaning in rows)


def test_every_metric_series_and_route_the_doc_names_exists() -> None:
    text = DOC.read_text()
    families = {metric.name for metric in Metrics().registry.collect()}
    # The records projector's own (orchestra records --port).
    families |= {metric.name for metric in Status(Lag).registry.collect()}
    series = set(re.findall(r"`(orchestra_[a-z_]+)", text))
    # prometheus_client names a counter's family without its _total suffix.
    assert {name.removesuffix("_total") for name in series} == families
    paths = {str(getattr(route, "path", "")) for route in create_app().routes}
    assert {"/healthz", "/readyz", "/metrics"} <= paths
    for path in ("/healthz", "/readyz", "/metrics"):
        assert f"`{path}`" in text or f"GET {path}" in text


def test_the_doc_states_the_measured_figures_and_the_commands_that_measure_them() -> None:
    text = DOC.read_text()
    assert "python -m bench.sizing" in text
    assert "MEMORY USAGE 'orchestra:{GAME}:events' SAMPLES 0" in text
    for placeholder in ("SIZING_", "REDIS_TABLE", "REDIS_EVENTS", "REDIS_GAMES"):
        assert placeholder not in text
    for command in ("orchestra archive", "orchestra verify", "BGREWRITEAOF", "appendonlydir"):
        assert command in text
