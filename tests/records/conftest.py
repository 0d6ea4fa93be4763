"""Fixtures of the records' tests: the records database on each real database."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from server.records.database import SqlRecords, open_records
from tests.records.postgres import PostgresProcess, postgres_bin


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresProcess]:
    """A PostgreSQL server of this module's own."""
    if postgres_bin() is None:
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql; .ci/run installs it)")
    server = PostgresProcess().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def records_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh records database's URL on SQLite, then on PostgreSQL (its tables dropped afterwards)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'records.sqlite3'}"
        return
    server: PostgresProcess = request.getfixturevalue("postgres")
    yield server.url
    database = open_records(server.url, tmp_path)
    database.drop()
    database.close()


@pytest.fixture
def open_db(records_url: str, tmp_path: Path) -> Callable[[], SqlRecords]:
    """Open the records database of `records_url` (each call a new connection)."""
    return lambda: open_records(records_url, tmp_path)
