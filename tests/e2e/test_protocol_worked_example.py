"""docs/protocol.md section 7's worked example, as written: its commands print what the doc says they
print (under bash and sh), they fail on an altered envelope, and the clients and the server's own
verifier agree with them on the doc's envelope and key."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from orchestra_client import SigningKeys
from server.engine.notary import proof_problem
from server.engine.signing import Keyring, public_key_from_text
from server.protocol import envelope

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
TOOLS = ("bash", "sh", "sed", "tr", "sha256sum", "xxd", "base64", "openssl")


def _example() -> tuple[str, str]:
    """The section's commands and the output it shows for them."""
    text = DOC.read_text()
    section = text[text.index("## 7. The envelope") : text.index("## 8. ")]
    found = re.search(
        r"\*\*Worked example\.\*\*.*?^```sh\n(.*?)^```\n\nThey print:\n\n```text\n(.*?)^```",
        section,
        re.M | re.S,
    )
    assert found is not None, "section 7 has no worked example followed by its output"
    return found.group(1), found.group(2)


def _run(shell: str, script: str, directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [shell, "-eu"], input=script, cwd=directory, capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def tools() -> None:
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"the worked example needs {', '.join(missing)}")


@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_the_worked_examples_commands_print_what_the_doc_shows(
    tools: None, shell: str, tmp_path: Path
) -> None:
    script, shown = _example()
    ran = _run(shell, script, tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout == shown


def test_the_worked_example_fails_on_an_altered_envelope(tools: None, tmp_path: Path) -> None:
    script, shown = _example()
    altered = script.replace('"seat":0,"event"', '"seat":1,"event"', 1)
    assert altered != script
    ran = _run("bash", altered, tmp_path)
    assert ran.returncode != 0
    assert "Signature Verification Failure" in ran.stdout + ran.stderr
    root = re.search(r"^root  (\w+)$", shown, re.M)
    assert root is not None and root.group(1) not in ran.stdout


def test_the_clients_and_the_servers_verifier_agree_with_the_worked_example() -> None:
    script, shown = _example()
    line_match = re.search(r"^cat > line\.json <<'EOF'\n(.*?)\nEOF$", script, re.M)
    key_match = re.search(r"^PUBLIC_KEY='(.*?)'$", script, re.M)
    assert line_match is not None and key_match is not None
    line, public_key = line_match.group(1).encode(), key_match.group(1)
    keys = SigningKeys([{"public_key": public_key}])
    assert keys.verify(line).ok
    assert keys.verify(line.replace(b'"seat":0,"event"', b'"seat":1,"event"')).problem
    split = envelope.split_proof(line)
    assert split is not None
    body, proof = split
    assert proof_problem(Keyring([public_key_from_text(public_key)]), "c142bb6d43d1a740", body, proof) is None
    assert f"{envelope.chain_hash(line)}  body.json" in shown
    assert len(base64.b64decode(public_key)) == 32
