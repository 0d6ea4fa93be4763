"""deploy/Dockerfile builds and runs: with no container engine here, the image is built as its lines say.

Its COPY lines are laid out in a temporary root (a missing source fails, naming it), the RUN line's pip
install runs there into a fresh venv, and the image's CMD, with its ENV, serves from it: /readyz, a page,
and the JavaScript client with the bytes of clients/js. The HEALTHCHECK runs against it; the Compose file
and the Kubernetes manifests run that image's entry point with settings it can run with.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import secrets
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bench.child import ChildServer
from tests.deploy.dockerfile import Dockerfile, UnreadLine
from tests.deploy.test_deploy import compose, compose_nodes, one, route_paths, server_container
from tests.deploy.venvs import Venv, get, make_venv
from tests.support.waiting import until_sync

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = Dockerfile(ROOT / "deploy" / "Dockerfile")
# What the wheel is made of; benchmarks and tests stay out of the image.
PACKAGES = {"domain", "projections", "server", "orchestra_client"}
NEVER_COPIED = {"bench", "tests", ".venv", "var", "test-artifacts", "deploy"}


def uid_of(user: str) -> int:
    """The numeric uid of a USER value (`uid[:gid]`)."""
    name = user.split(":")[0]
    assert name.isdigit(), f"USER {user}: a numeric uid lets Kubernetes' runAsNonRoot check it"
    return int(name)


def in_image(root: Path, path: str) -> Path:
    """Where an absolute path of the image lies in the temporary root."""
    return root / PurePosixPath(path).relative_to("/")


def pip_install_args() -> list[str]:
    """The arguments of the RUN line's `pip install`, without --no-cache-dir: the image keeps no cache,
    the test reuses pip's to stay quick. Everything else in the RUN line is checked, not run."""
    installs = [words for words in DOCKERFILE.run_commands if words[:2] == ["pip", "install"]]
    assert len(installs) == 1, DOCKERFILE.run_commands
    return [word for word in installs[0][2:] if word != "--no-cache-dir"]


# The Dockerfile as written ---------------------------------------------------------------------------


def test_every_copy_source_exists_and_the_image_gets_the_wheels_packages_and_nothing_else() -> None:
    copied: list[str] = []
    for copy in DOCKERFILE.copies:
        for source in copy.sources:
            assert (ROOT / source).exists(), f"COPY source {source!r} does not exist"
            copied.append(source)
    top = {source.split("/")[0] for source in copied}
    assert top & NEVER_COPIED == set()
    assert PACKAGES <= top and "pyproject.toml" in top and "README.md" in top
    assert {"clients/js/orchestra.js", "clients/js/orchestra.d.ts"} <= set(copied)


def test_a_missing_copy_source_fails_naming_it(tmp_path: Path) -> None:
    broken = tmp_path / "Dockerfile"
    text = DOCKERFILE.path.read_text().replace("COPY orchestra_client orchestra_client", "COPY client client")
    assert text != DOCKERFILE.path.read_text()
    broken.write_text(text)
    with pytest.raises(FileNotFoundError, match="COPY source 'client' does not exist"):
        Dockerfile(broken).lay_out(ROOT, tmp_path / "root")


def test_an_instruction_the_tests_do_not_read_is_refused_not_skipped(tmp_path: Path) -> None:
    odd = tmp_path / "Dockerfile"
    odd.write_text(DOCKERFILE.path.read_text() + "ADD https://example.org/x /x\n")
    with pytest.raises(UnreadLine, match="ADD"):
        Dockerfile(odd)
    odd.write_text(DOCKERFILE.path.read_text().replace("COPY server server", "COPY --chown=1 server server"))
    with pytest.raises(UnreadLine, match="flags"):
        _ = Dockerfile(odd).copies


def test_the_copied_tree_has_every_link_resolved_inside_it_and_no_bytecode(tmp_path: Path) -> None:
    workdir = DOCKERFILE.lay_out(ROOT, tmp_path)
    links = [path for path in tmp_path.rglob("*") if path.is_symlink()]
    assert links, "server/web/client/ links into clients/js/"
    for link in links:
        target = link.resolve()
        assert target.is_file() and target.is_relative_to(tmp_path), f"{link} dangles in the image"
    client = workdir / "server" / "web" / "client" / "orchestra.js"
    assert client.read_bytes() == (ROOT / "clients" / "js" / "orchestra.js").read_bytes()
    assert not any(tmp_path.rglob("__pycache__"))
    assert sorted(p.name for p in workdir.iterdir()) == sorted(
        [*PACKAGES, "clients", "pyproject.toml", "README.md"]
    )


def test_the_image_runs_as_the_unprivileged_user_that_owns_only_its_data_directory() -> None:
    uid = uid_of(DOCKERFILE.user)
    assert uid != 0 and DOCKERFILE.user.split(":")[0] != "root"
    (useradd,) = [words for words in DOCKERFILE.run_commands if words[0] == "useradd"]
    assert useradd[useradd.index("--uid") + 1] == str(uid) and "--system" in useradd
    data_dir = DOCKERFILE.env["ORCHESTRA_DATA_DIR"]
    assert data_dir in DOCKERFILE.volumes
    (made,) = [words for words in DOCKERFILE.run_commands if words[:2] == ["install", "-d"]]
    assert made[-1] == data_dir and made[made.index("-o") + 1] == str(uid)
    # The USER comes after the RUN that needs root (pip into the system site-packages, useradd).
    keywords = [i.keyword for i in DOCKERFILE.instructions]
    assert keywords.index("USER") > keywords.index("RUN")


def test_the_healthcheck_asks_readyz_with_the_images_own_python() -> None:
    command = DOCKERFILE.healthcheck
    assert command[:2] == ["python", "-c"]
    assert "/readyz" in command[2] and "/readyz" in route_paths()
    assert "ORCHESTRA_PORT" in command[2], "it follows the port the server listens on"


def test_compose_and_kubernetes_run_the_images_entry_point_and_settings() -> None:
    env = DOCKERFILE.env
    (port,) = DOCKERFILE.exposed
    assert env["ORCHESTRA_PORT"] == str(port) and env["ORCHESTRA_HOST"] == "0.0.0.0"
    assert DOCKERFILE.cmd == ["orchestra", "serve"]
    paths = route_paths()
    for name, node in compose_nodes().items():
        # No override: the node runs the image's CMD with its ENV (a command naming another script, or a
        # port other than the one EXPOSEd, would not be what the image runs).
        assert "command" not in node and "entrypoint" not in node, name
        assert node["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
        assert node["environment"].get("ORCHESTRA_PORT", str(port)) == str(port)
        (asked,) = re.findall(r"127\.0\.0\.1:(\d+)(/[\w/]*)", " ".join(node["healthcheck"]["test"]))
        assert asked[0] == str(port) and asked[1] in paths, (name, asked)
    container = server_container()
    assert "command" not in container and "args" not in container
    assert container["image"] == compose_nodes()["orchestra-1"]["image"]
    assert [p["containerPort"] for p in container["ports"]] == [port]
    assert one("ConfigMap", "orchestra-config")["data"]["ORCHESTRA_PORT"] == str(port)
    security = one("Deployment", "orchestra")["spec"]["template"]["spec"]["securityContext"]
    assert security["runAsNonRoot"] and security["runAsUser"] == uid_of(DOCKERFILE.user)
    # A read-only root: no embedded Redis and no key file may be written in the image's data dir.
    assert container["securityContext"]["readOnlyRootFilesystem"]
    set_by_secret = {entry["name"] for entry in container["env"]}
    assert {"ORCHESTRA_REDIS_URL", "ORCHESTRA_SIGNING_KEY"} <= set_by_secret
    assert compose()["services"]["orchestra-1"]["environment"]["ORCHESTRA_SIGNING_KEY"]


# The image, built as its lines say and run -------------------------------------------------------------


@dataclass
class Image:
    """The tree the Dockerfile makes (its / at `root`) and the venv its RUN line installed into."""

    root: Path
    workdir: Path
    venv: Venv

    def files(self) -> set[Path]:
        """Every file of the image outside its data directory."""
        data = in_image(self.root, DOCKERFILE.env["ORCHESTRA_DATA_DIR"])
        return {p for p in self.root.rglob("*") if not p.is_relative_to(data) and not p.is_dir()}

    def run(self, log: Path, **overrides: str) -> ChildServer:
        """The image's CMD with its ENV (absolute paths moved under `root`), `overrides` on top."""
        env = {k: str(in_image(self.root, v)) if v.startswith("/") else v for k, v in DOCKERFILE.env.items()}
        env.update(overrides)
        # Port 0 and loopback: the test must not take the machine's port 8000 nor listen beyond it.
        env.update(ORCHESTRA_PORT="0", ORCHESTRA_HOST="127.0.0.1")
        return self.venv.serve(DOCKERFILE.cmd, self.workdir, log, env)


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Image:
    root = tmp_path_factory.mktemp("image")
    workdir = DOCKERFILE.lay_out(ROOT, root / "fs")
    venv = make_venv(root / "venv")  # stands for the base image's Python, where pip installs
    venv.pip_install(*pip_install_args(), cwd=workdir)
    data = in_image(root / "fs", DOCKERFILE.env["ORCHESTRA_DATA_DIR"])
    data.mkdir(mode=0o700, parents=True)  # as the RUN line's `install -d` makes it
    return Image(root / "fs", workdir, venv)


@contextlib.contextmanager
def closed_port() -> Iterator[str]:
    """A loopback port nothing listens on: bound, never listening, for as long as it is held."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield str(held.getsockname()[1])


def wait_ready(url: str, seconds: float = 20.0) -> tuple[int, bytes]:
    """GET /readyz until it answers 200 or `seconds` pass; the last answer."""
    answers: list[tuple[int, bytes]] = []

    def ready() -> bool:
        answers.append(get(f"{url}/readyz"))
        return answers[-1][0] == 200

    with contextlib.suppress(AssertionError):  # the caller checks the status
        until_sync(ready, seconds, interval=0.2)
    return answers[-1]


@pytest.fixture(scope="module")
def served(image: Image, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ChildServer, set[Path]]]:
    before = image.files()
    server = image.run(tmp_path_factory.mktemp("logs") / "server.log")
    try:
        yield server, before
    finally:
        server.stop()


@pytest.mark.slow
def test_the_image_serves_readyz_a_page_and_the_javascript_client_it_copied(
    served: tuple[ChildServer, set[Path]],
) -> None:
    server, _ = served
    status, body = wait_ready(server.url)
    assert status == 200, (body, server.logs()[-2000:])
    assert b'"status":"ok"' in body.replace(b" ", b"")
    status, page = get(f"{server.url}/")
    assert status == 200 and b"<html" in page.lower()
    status, client = get(f"{server.url}/client/orchestra.js")
    assert status == 200 and client == (ROOT / "clients" / "js" / "orchestra.js").read_bytes()
    status, _ = get(f"{server.url}/client/orchestra.d.ts")
    assert status == 200
    # The embedded Redis ran from the venv (no redis-server on its PATH, as in the image).
    assert '"embedded redis started"' in server.logs()


@pytest.mark.slow
def test_the_server_writes_only_in_the_images_data_directory(
    image: Image, served: tuple[ChildServer, set[Path]]
) -> None:
    """Its user owns nothing else: a file written beside the code would fail in the image."""
    server, before = served
    assert wait_ready(server.url)[0] == 200
    get(f"{server.url}/games")
    assert image.files() == before
    data = in_image(image.root, DOCKERFILE.env["ORCHESTRA_DATA_DIR"])
    assert {"orchestra.lock", "signing.key"} <= {p.name for p in data.iterdir()}


@pytest.mark.slow
def test_the_healthcheck_command_passes_on_the_server_and_fails_without_one(
    image: Image, served: tuple[ChildServer, set[Path]]
) -> None:
    server, _ = served
    assert wait_ready(server.url)[0] == 200
    port = server.url.rsplit(":", 1)[1]
    command = [str(image.venv.bin / DOCKERFILE.healthcheck[0]), *DOCKERFILE.healthcheck[1:]]
    passed = subprocess.run(command, env=image.venv.environ({"ORCHESTRA_PORT": port}), capture_output=True)
    assert passed.returncode == 0, passed.stderr
    with closed_port() as closed:
        failed = subprocess.run(
            command, env=image.venv.environ({"ORCHESTRA_PORT": closed}), capture_output=True
        )
    assert failed.returncode != 0 and b"Connection refused" in failed.stderr


@pytest.mark.slow
def test_every_entry_point_the_deployments_name_is_a_script_of_the_installed_image(image: Image) -> None:
    commands = {"Dockerfile CMD": DOCKERFILE.cmd, "HEALTHCHECK": DOCKERFILE.healthcheck}
    for name, node in compose_nodes().items():
        commands[f"compose {name}"] = node.get("command", DOCKERFILE.cmd)
    container = server_container()
    commands["k8s Deployment"] = container.get("command", DOCKERFILE.cmd) + container.get("args", [])
    for name, command in commands.items():
        assert (image.venv.bin / command[0]).exists(), f"{name} runs {command[0]!r}, which is not installed"
    help_text = subprocess.run(
        [str(image.venv.bin / "orchestra"), *DOCKERFILE.cmd[1:], "--help"],
        env=image.venv.environ(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert re.search(r"usage: orchestra serve", help_text)


@pytest.mark.slow
def test_the_image_runs_with_the_kubernetes_settings_on_a_read_only_root(
    image: Image, redis_url: str, tmp_path: Path
) -> None:
    """The ConfigMap's settings and the Secret's names (real values): Redis and the key come from them, so
    the server writes nothing, not even in the data directory, which the read-only root filesystem keeps."""
    settings = {k: str(v) for k, v in one("ConfigMap", "orchestra-config")["data"].items()}
    key = Ed25519PrivateKey.generate().private_bytes_raw()
    secret = {
        "ORCHESTRA_REDIS_URL": redis_url,
        "ORCHESTRA_API_KEY": secrets.token_hex(24),
        "ORCHESTRA_SIGNING_KEY": base64.b64encode(key).decode(),
    }
    assert secret.keys() == {entry["name"] for entry in server_container()["env"]}
    blocker = tmp_path / "read-only"
    blocker.write_text("")  # a file: nothing can be made below it, whoever runs the server
    settings.update(secret, ORCHESTRA_DATA_DIR=str(blocker / "data"))
    server = image.run(tmp_path / "server.log", **settings)
    try:
        status, body = wait_ready(server.url)
        assert status == 200, (body, server.logs()[-2000:])
        assert get(f"{server.url}/")[0] == 200
    finally:
        server.stop()
    assert blocker.read_text() == "" and not os.path.isdir(blocker)
