"""The clean-log check of tests/conftest.py: a test in which a server logged a warning fails, in process or
in a child process, unless marked `logs_warnings`; a test that logged nothing of the kind passes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.logs import warning_lines

ROOT = Path(__file__).resolve().parents[1]

CASES = """
import logging

import pytest


def test_in_process_warning():
    logging.getLogger("server.engine.owner").warning("tail interrupted, retrying")


def test_in_process_error_during_setup(failing_fixture):
    pass


@pytest.fixture
def failing_fixture():
    logging.getLogger("uvicorn.error").error("Exception in ASGI application")


@pytest.mark.logs_warnings
def test_marked_warning():
    logging.getLogger("server.web.ws").warning("command refused: the store is full")


def test_info_and_other_loggers_only():
    logging.getLogger("server.web.ws").info("command accepted")
    logging.getLogger("asyncio").warning("a library's own word")
"""


def run(test_file: Path) -> str:
    """Run a test file under this project's conftest and settings, in one process; its report (a node id
    outside the project's folder is shown as `::name`)."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "tests.conftest", "-n", "0"]
        + ["-c", str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT), "-rA", str(test_file)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout + done.stderr


def test_a_warning_logged_in_process_fails_its_test_unless_marked(tmp_path: Path) -> None:
    cases = tmp_path / "test_cases.py"
    cases.write_text(CASES)
    report = run(cases)
    assert "ERROR ::test_in_process_warning - Failed: logged at warning" in report, report
    assert "tail interrupted, retrying" in report
    assert "ERROR ::test_in_process_error_during_setup - Failed: logged at warning" in report
    assert "Exception in ASGI application" in report
    assert "PASSED ::test_marked_warning" in report and "ERROR ::test_marked_warning" not in report
    assert "ERROR ::test_info_and_other_loggers_only" not in report
    assert "4 passed, 2 errors" in report, report


@pytest.mark.integration
def test_a_warning_a_child_server_wrote_while_serving_fails_its_test(tmp_path: Path) -> None:
    """A request no HTTP parser reads: uvicorn answers 400 and logs a warning, which fails the test; a
    server that only served (its start-up lines aside) passes."""
    cases = tmp_path / "test_child.py"
    cases.write_text(
        "import socket\n"
        "from urllib.parse import urlsplit\n\n"
        "import httpx\n\n\n"
        "def test_child(start_server):\n"
        "    server = start_server()\n"
        "    parts = urlsplit(server.url)\n"
        "    with socket.create_connection((parts.hostname, parts.port), timeout=5) as raw:\n"
        "        raw.sendall(b'\\x00\\x01 nonsense\\r\\n\\r\\n')\n"
        "        assert raw.recv(1000).startswith(b'HTTP/1.1 400')\n"
        "    server.stop()  # every line written\n\n\n"
        "def test_quiet_child(start_server):\n"
        "    server = start_server()\n"
        "    assert httpx.get(server.url + '/readyz', timeout=10).status_code == 200\n"
        "    server.stop()\n"
    )
    report = run(cases)
    assert "ERROR ::test_child - Failed: logged at warning" in report, report
    assert "Invalid HTTP request received." in report
    assert "PASSED ::test_quiet_child" in report and "ERROR ::test_quiet_child" not in report, report


def test_the_lines_of_a_json_log_at_warning_or_above_are_found() -> None:
    log = "\n".join(
        [
            '{"level": "info", "msg": "command accepted"}',
            '{"level": "warning", "msg": "tail interrupted, retrying"}',
            '{"level": "error", "msg": "commit round failed"}',
            "Traceback (most recent call last):",
            "not json at all",
        ]
    )
    assert warning_lines(log) == log.splitlines()[1:4]
