"""A PostgreSQL server of a test's own, from Debian's packages, on a free port in a temporary directory."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.support.redis import free_port


def postgres_bin() -> Path | None:
    """The folder of Debian's initdb and pg_ctl (the newest version installed), or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


class PostgresProcess:
    """initdb into `root`, then pg_ctl start on a free port; a superuser `postgres` that trusts local logins.

    PostgreSQL refuses to run as root, so as root it runs as the `postgres` user Debian's package makes, in a
    directory of its own under the system's temporary folder (pytest's are closed to other users).
    """

    def __init__(self) -> None:
        bin_dir = postgres_bin()
        assert bin_dir is not None
        self._bin = bin_dir
        self._root = Path(tempfile.mkdtemp(prefix="orchestra-pg-"))
        self.data = self._root / "pgdata"
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        command = [str(self._bin / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def start(self) -> PostgresProcess:
        if os.geteuid() == 0:
            shutil.chown(self._root, "postgres", "postgres")
        self._run(
            "initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C"
        )
        options = f"-p {self.port} -k {self._root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            "pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self._root / "pg.log"), "-w", "start"
        )
        return self

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self._root, ignore_errors=True)
