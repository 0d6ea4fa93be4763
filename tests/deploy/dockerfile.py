"""deploy/Dockerfile read as a builder reads it: its instructions, and the tree its COPY lines make.

Only the forms the Dockerfile uses are understood; any other instruction or flag raises, so the tests never
pass over a line they did not read.
"""

from __future__ import annotations

import json
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

KNOWN = {
    "FROM",
    "WORKDIR",
    "COPY",
    "RUN",
    "USER",
    "ENV",
    "VOLUME",
    "EXPOSE",
    "HEALTHCHECK",
    "STOPSIGNAL",
    "CMD",
}


class UnreadLine(ValueError):
    """A Dockerfile line in a form these tests do not read."""


@dataclass(frozen=True)
class Instruction:
    """One instruction: its keyword (upper case) and the rest of its (joined) line."""

    keyword: str
    rest: str


@dataclass(frozen=True)
class Copy:
    """A COPY line: its sources (relative to the build context) and its destination (in the image)."""

    sources: tuple[str, ...]
    destination: PurePosixPath


def instructions(text: str) -> list[Instruction]:
    """The instructions of a Dockerfile, continuation lines joined and comments dropped."""
    found: list[Instruction] = []
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        keyword, _, rest = (pending + stripped).partition(" ")
        pending = ""
        if keyword.upper() not in KNOWN:
            raise UnreadLine(f"instruction {keyword!r} is not read by tests/deploy")
        found.append(Instruction(keyword.upper(), rest.strip()))
    if pending:
        raise UnreadLine(f"the Dockerfile ends inside a continued line: {pending!r}")
    return found


def exec_form(rest: str) -> list[str]:
    """A JSON-array argument (CMD, HEALTHCHECK's CMD); the shell form is refused: it needs /bin/sh -c."""
    value = json.loads(rest)
    if not isinstance(value, list) or not all(isinstance(part, str) for part in value):
        raise UnreadLine(f"not a JSON array of strings: {rest!r}")
    return value


class Dockerfile:
    """The instructions of one Dockerfile, by what they set."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.instructions = instructions(path.read_text())

    def _all(self, keyword: str) -> list[str]:
        return [i.rest for i in self.instructions if i.keyword == keyword]

    def _last(self, keyword: str) -> str:
        found = self._all(keyword)
        assert found, f"{self.path.name} has no {keyword}"
        return found[-1]

    @property
    def workdir(self) -> PurePosixPath:
        """The working directory (one absolute WORKDIR before any COPY)."""
        (workdir,) = self._all("WORKDIR")
        path = PurePosixPath(workdir)
        assert path.is_absolute(), workdir
        return path

    @property
    def copies(self) -> list[Copy]:
        """The COPY lines, destinations resolved against WORKDIR."""
        found = []
        for rest in self._all("COPY"):
            words = shlex.split(rest)
            if any(word.startswith("--") for word in words) or rest.startswith("["):
                raise UnreadLine(f"COPY with flags or in JSON form is not read by tests/deploy: {rest!r}")
            *sources, destination = words
            assert sources, rest
            found.append(Copy(tuple(sources), self.workdir / destination))
        return found

    @property
    def run_commands(self) -> list[list[str]]:
        """The commands of the RUN lines in order (each line split at `&&`), each split into words."""
        return [shlex.split(part) for rest in self._all("RUN") for part in rest.split("&&")]

    @property
    def env(self) -> dict[str, str]:
        """What the ENV lines set (in the `NAME=value ...` form)."""
        env: dict[str, str] = {}
        for rest in self._all("ENV"):
            for pair in shlex.split(rest):
                name, equals, value = pair.partition("=")
                if not equals:
                    raise UnreadLine(f"ENV in the legacy `NAME value` form: {rest!r}")
                env[name] = value
        return env

    @property
    def user(self) -> str:
        """The USER the container runs as (user[:group])."""
        return self._last("USER")

    @property
    def cmd(self) -> list[str]:
        """The CMD, which must be in the exec form."""
        return exec_form(self._last("CMD"))

    @property
    def exposed(self) -> list[int]:
        """The EXPOSEd TCP ports."""
        return [int(port.removesuffix("/tcp")) for rest in self._all("EXPOSE") for port in rest.split()]

    @property
    def volumes(self) -> list[str]:
        """The VOLUME paths (space-separated form)."""
        return [path for rest in self._all("VOLUME") for path in rest.split()]

    @property
    def healthcheck(self) -> list[str]:
        """The HEALTHCHECK's command (exec form), its --options dropped."""
        words = self._last("HEALTHCHECK").split(" ")
        options = [word for word in words if word.startswith("--")]
        rest = " ".join(word for word in words if not word.startswith("--")).strip()
        assert all(option.split("=")[0] in _HEALTH_OPTIONS for option in options), options
        keyword, _, argument = rest.partition(" ")
        assert keyword == "CMD", rest
        return exec_form(argument)

    @property
    def ignored_names(self) -> list[str]:
        """The names its `<name>.dockerignore` (beside it) leaves out at any depth (`**/name`)."""
        ignore = self.path.with_name(self.path.name + ".dockerignore")
        lines = [line.strip() for line in ignore.read_text().splitlines()] if ignore.exists() else []
        patterns = [line for line in lines if line and not line.startswith("#")]
        for pattern in patterns:
            if not pattern.startswith("**/") or "/" in pattern[3:] or pattern.startswith("!"):
                raise UnreadLine(
                    f"{ignore.name}: only `**/name` patterns are read by tests/deploy: {pattern!r}"
                )
        return [pattern[3:] for pattern in patterns]

    def lay_out(self, context: Path, root: Path) -> Path:
        """Copy what the COPY lines copy from `context` into `root` (as the image's /), as COPY does:
        a directory's contents (links kept as links), a file into a destination ending in `/`. Returns the
        WORKDIR under `root`.

        Raises: FileNotFoundError naming a COPY source that does not exist."""
        for copy in self.copies:
            target = root / copy.destination.relative_to("/")
            into_folder = len(copy.sources) > 1 or str(copy.destination).endswith("/")
            for source in copy.sources:
                origin = context / source
                if not origin.exists():
                    raise FileNotFoundError(f"COPY source {source!r} does not exist in the build context")
                if origin.is_dir():
                    ignore = shutil.ignore_patterns(*self.ignored_names)
                    shutil.copytree(origin, target, symlinks=True, dirs_exist_ok=True, ignore=ignore)
                else:
                    destination = target / origin.name if into_folder else target
                    destination.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(origin, destination)
        workdir = root / self.workdir.relative_to("/")
        workdir.mkdir(parents=True, exist_ok=True)
        return workdir


_HEALTH_OPTIONS = {"--interval", "--timeout", "--start-period", "--start-interval", "--retries"}
