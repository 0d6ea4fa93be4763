"""deploy/ cannot run here (no Docker engine, no Kubernetes): its files are parsed and cross-checked.

Every ORCHESTRA_* variable set anywhere is one the server reads (and its value converts); probes hit real
routes; ports agree between the Service, the Deployment, compose, nginx and the server; the proxy passes
websocket upgrades; a real redis-server accepts deploy/redis.conf (the image: test_image.py; the unit:
test_unit.py).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import redis
import yaml

from server import config
from server.ops.embedded_redis import find_redis_server
from server.web.app import create_app
from tests.deploy.dockerfile import Dockerfile
from tests.support.redis import free_port, wait_for_ping

ROOT = Path(__file__).resolve().parents[2]

DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"

K8S_VERSION = "1.30.0"  # the oldest Kubernetes these manifests are meant for
SERVER_PORT = 8000
ENV_NAME = re.compile(r"\bORCHESTRA_[A-Z][A-Z0-9_]*\b")


def graceful_shutdown_seconds() -> int:
    """uvicorn's graceful shutdown timeout as `orchestra serve` sets it."""
    from server.config import Settings
    from server.ops.runner import uvicorn_server

    # A connection cap under any descriptor limit, so that building the server warns of nothing.
    seconds = uvicorn_server(Settings(max_connections=100)).config.timeout_graceful_shutdown
    assert seconds is not None
    return int(seconds)


def manifests() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted(K8S.glob("*.yaml")):
        docs += [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    return docs


def one(kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in manifests() if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(found) == 1, (kind, name, len(found))
    return found[0]


def server_container() -> dict[str, Any]:
    pod: dict[str, Any] = one("Deployment", "orchestra")["spec"]["template"]["spec"]
    containers: list[dict[str, Any]] = pod["containers"]
    (container,) = containers
    return container


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    return loaded


def compose_nodes() -> dict[str, dict[str, Any]]:
    return {name: svc for name, svc in compose()["services"].items() if name.startswith("orchestra-")}


def interpolated(value: object) -> str:
    """A compose value with its ${VAR...} references filled in, as compose would with VAR set."""
    return re.sub(r"\$\{[^}]*\}", "secret", str(value))


def route_paths() -> set[str]:
    return {str(getattr(route, "path", "")) for route in create_app().routes}


# Settings ------------------------------------------------------------------------------------------


def test_every_orchestra_variable_in_deploy_is_one_the_server_reads() -> None:
    seen: dict[str, set[str]] = {}
    for path in DEPLOY.rglob("*"):
        if path.is_file():
            for name in ENV_NAME.findall(path.read_text()):
                seen.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    assert seen, "deploy/ sets no ORCHESTRA_* variable at all"
    unknown = {name: files for name, files in seen.items() if name not in config.ENV_NAMES}
    assert unknown == {}
    assert {"ORCHESTRA_REDIS_URL", "ORCHESTRA_PORT", "ORCHESTRA_HOST"} <= seen.keys()


def settings_sources() -> Iterator[tuple[str, dict[str, str]]]:
    yield "k8s ConfigMap", {k: str(v) for k, v in one("ConfigMap", "orchestra-config")["data"].items()}
    secret = one("Secret", "orchestra-secrets")["stringData"]
    yield "k8s Secret", {k: str(v) for k, v in secret.items() if k.startswith(config.PREFIX)}
    for name, node in compose_nodes().items():
        yield f"compose {name}", {k: interpolated(v) for k, v in node["environment"].items()}
    env_file = DEPLOY / "orchestra.env"
    pairs = [line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line]
    yield "orchestra.env", {k.strip(): v.strip() for k, v in pairs if not k.lstrip().startswith("#")}


@pytest.mark.parametrize("source", [name for name, _ in settings_sources()])
def test_each_settings_source_converts_to_valid_settings(source: str) -> None:
    environ = dict(settings_sources())[source]
    # FORWARDED_ALLOW_IPS: the proxies trusted to name the client, read by server.ops.runner.
    assert environ and all(key in (*config.ENV_NAMES, "FORWARDED_ALLOW_IPS") for key in environ), environ
    settings = config.from_env(environ)  # raises on an unknown name or a value of the wrong type
    if "ORCHESTRA_PORT" in environ:
        assert settings.port == SERVER_PORT


# Kubernetes ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("doc", manifests(), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_each_manifest_is_valid_against_the_official_schema(doc: dict[str, Any]) -> None:
    # Strict: an unknown or misplaced field is an error, not silently ignored as kubectl would.
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    assert doc["metadata"]["labels"]["app.kubernetes.io/name"].startswith("orchestra")


def test_the_probes_hit_real_routes_liveness_healthz_readiness_readyz() -> None:
    container = server_container()
    paths = route_paths()
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        assert container[probe]["httpGet"]["path"] in paths
        assert container[probe]["httpGet"]["port"] == "http"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    annotations = one("Deployment", "orchestra")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/path"] in paths
    assert int(annotations["prometheus.io/port"]) == SERVER_PORT


def test_ports_agree_between_service_deployment_configmap_and_the_server() -> None:
    container = server_container()
    (port,) = container["ports"]
    assert port == {"name": "http", "containerPort": SERVER_PORT, "protocol": "TCP"}
    assert one("ConfigMap", "orchestra-config")["data"]["ORCHESTRA_PORT"] == str(SERVER_PORT)
    assert "command" not in container  # the image's CMD runs (tests/deploy/test_image.py)
    (service_port,) = one("Service", "orchestra")["spec"]["ports"]
    assert service_port["targetPort"] == port["name"]
    ingress = one("Ingress", "orchestra")["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert ingress == {"name": "orchestra", "port": {"name": service_port["name"]}}
    assert "EXPOSE 8000" in (DEPLOY / "Dockerfile").read_text()


def test_selectors_and_references_resolve() -> None:
    deployment = one("Deployment", "orchestra")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert one("Service", "orchestra")["spec"]["selector"].items() <= labels.items()
    assert one("Service", "orchestra")["spec"]["sessionAffinity"] == "None"
    assert (
        one("PodDisruptionBudget", "orchestra")["spec"]["selector"]["matchLabels"].items() <= labels.items()
    )
    assert deployment["spec"]["replicas"] >= 2
    container = server_container()
    assert container["envFrom"] == [{"configMapRef": {"name": "orchestra-config"}}]
    secret = one("Secret", "orchestra-secrets")["stringData"]
    redis_set = one("StatefulSet", "orchestra-redis")
    redis_container = redis_set["spec"]["template"]["spec"]["containers"][0]
    for entry in [*container["env"], *redis_container["env"]]:
        ref = entry["valueFrom"]["secretKeyRef"]
        assert ref["name"] == "orchestra-secrets" and ref["key"] in secret
    assert "orchestra-redis:6379" in secret["ORCHESTRA_REDIS_URL"]
    assert one("Service", "orchestra-redis")["spec"]["selector"].items() <= (
        redis_set["spec"]["template"]["metadata"]["labels"].items()
    )
    # The StatefulSet reads deploy/redis.conf from the ConfigMap its comment tells how to create.
    volumes = {v["name"]: v for v in redis_set["spec"]["template"]["spec"]["volumes"]}
    assert volumes["config"]["configMap"]["name"] == "orchestra-redis-conf"
    assert "--from-file=redis.conf=deploy/redis.conf" in (K8S / "redis.yaml").read_text()
    assert "redis-server /etc/redis/redis.conf --dir /data" in redis_container["command"][-1]


def test_the_grace_period_covers_prestop_and_the_servers_graceful_shutdown() -> None:
    spec = one("Deployment", "orchestra")["spec"]["template"]["spec"]
    pre_stop = server_container()["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    budget = int(pre_stop[1]) + graceful_shutdown_seconds()
    assert budget + 5 <= spec["terminationGracePeriodSeconds"] <= budget + 30
    resources = server_container()["resources"]
    assert {"cpu", "memory"} <= resources["requests"].keys() and "memory" in resources["limits"]


# Compose and the proxy -----------------------------------------------------------------------------


def nginx_directives() -> list[list[str]]:
    """nginx.conf as a flat list of directives (each a list of words), comments and blocks dropped."""
    text = re.sub(r"#[^\n]*", "", (DEPLOY / "nginx.conf").read_text())
    words = re.findall(r"'[^']*'|\"[^\"]*\"|[{};]|[^\s{};]+", text)
    directives: list[list[str]] = []
    current: list[str] = []
    for word in words:
        if word in ("{", "}", ";"):
            if current:
                directives.append(current)
            current = []
        else:
            current.append(word)
    return directives


def test_the_proxy_passes_websocket_upgrades_with_long_timeouts_to_every_node() -> None:
    directives = nginx_directives()
    assert ["proxy_http_version", "1.1"] in directives
    assert ["proxy_set_header", "Upgrade", "$http_upgrade"] in directives
    assert ["proxy_set_header", "Connection", "$connection_upgrade"] in directives
    assert ["map", "$http_upgrade", "$connection_upgrade"] in directives
    assert ["default", "upgrade"] in directives
    for name in ("proxy_read_timeout", "proxy_send_timeout"):
        (value,) = [d[1] for d in directives if len(d) == 2 and d[0] == name]
        assert value.endswith("s") and int(value[:-1]) >= 3600
    upstreams = {d[1] for d in directives if len(d) > 1 and d[0] == "server" and ":" in d[1]}
    assert upstreams == {f"{name}:{SERVER_PORT}" for name in compose_nodes()}
    listen = [d[1] for d in directives if len(d) == 2 and d[0] == "listen"]
    assert compose()["services"]["proxy"]["ports"] == [f"{listen[0]}:{listen[0]}"]


def test_compose_runs_several_nodes_with_healthchecks_and_a_durable_redis() -> None:
    nodes = compose_nodes()
    assert len(nodes) >= 2
    for node in nodes.values():
        assert "command" not in node  # the image's CMD and ENV (tests/deploy/test_image.py)
        assert any("/healthz" in part for part in node["healthcheck"]["test"])
        assert "/healthz" in route_paths()
        assert node["environment"]["ORCHESTRA_REDIS_URL"].endswith("@redis:6379/0")
        assert node["depends_on"]["redis"]["condition"] == "service_healthy"
        grace = int(node["stop_grace_period"].rstrip("s"))
        assert grace >= graceful_shutdown_seconds() + 5
    services = compose()["services"]
    proxy = services["proxy"]
    assert "./nginx.conf:/etc/nginx/nginx.conf:ro" in proxy["volumes"]
    assert any("/healthz" in part for part in proxy["healthcheck"]["test"])
    store = services["redis"]
    config_mount = "./redis.conf:/usr/local/etc/redis/redis.conf:ro"
    assert config_mount in store["volumes"] and "redis-data:/data" in store["volumes"]
    assert store["command"][:2] == ["redis-server", "/usr/local/etc/redis/redis.conf"]
    assert "redis-data" in compose()["volumes"]
    assert Dockerfile(DEPLOY / "Dockerfile").env["ORCHESTRA_PORT"] == str(SERVER_PORT)


# Redis ---------------------------------------------------------------------------------------------


def redis_7() -> str | None:
    """A redis-server of version 7 or later (deploy/ targets Redis 7: multi-part AOF with timestamps)."""
    for candidate in (find_redis_server(), shutil.which("redis-server"), "/usr/bin/redis-server"):
        if candidate and os.access(candidate, os.X_OK):
            shown = subprocess.run([candidate, "--version"], capture_output=True, text=True).stdout
            found = re.search(r"v=(\d+)\.", shown)
            if found and int(found.group(1)) >= 7:
                return candidate
    return None


def test_a_real_redis_server_accepts_the_config_with_its_durability_and_memory_settings(
    tmp_path: Path,
) -> None:
    executable = redis_7()
    if executable is None:
        pytest.skip("deploy/redis.conf targets Redis 7+; only an older redis-server is installed here")
    port = free_port()
    args = [executable, str(DEPLOY / "redis.conf")]
    args += ["--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp_path)]
    process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        wait_for_ping(port, process)
        with redis.Redis(port=port, socket_timeout=5, decode_responses=True) as client:
            got = {k: client.config_get(k)[k] for k in ("appendonly", "appendfsync", "maxmemory-policy")}
            assert got == {"appendonly": "yes", "appendfsync": "always", "maxmemory-policy": "noeviction"}
            assert client.config_get("save")["save"] == ""
            assert client.config_get("protected-mode")["protected-mode"] == "yes"
            with pytest.raises(redis.ResponseError, match="unknown command"):
                client.execute_command("FLUSHALL")
            with pytest.raises(redis.ResponseError):
                client.config_set("dir", "/tmp")  # a protected config
            client.xadd("orchestra:{g}:events", {"e": b"x"}, id="0-1")
        assert any((tmp_path / "appendonlydir").glob("*.incr.aof"))
    finally:
        process.terminate()
        process.wait(10)


def test_every_example_api_key_is_a_placeholder_the_server_refuses_to_start_with() -> None:
    """An operator who copies an example without replacing its API key gets a server that says so."""
    from server.auth import api_key_problem

    keys = {name: env["ORCHESTRA_API_KEY"] for name, env in settings_sources() if "ORCHESTRA_API_KEY" in env}
    assert {"k8s Secret", "orchestra.env"} <= keys.keys()
    for name, key in keys.items():
        assert api_key_problem(key) is not None, name
