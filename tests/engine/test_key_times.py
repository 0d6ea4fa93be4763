"""Signing keys with a time: the period a rotation records, a retired key held to what it signed before its
retirement and in order, an import of what only a retired key vouches for, key files others may read,
and the examples' Redis password."""

from __future__ import annotations

import os
import re
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec
import pytest

from domain import EndGame, decide
from server.config import Settings, redis_url_problem
from server.engine.signing import Keyring, Signer, SigningKeyError, Trusted, time_text, trusted_from_text
from server.engine.trailer import trailer_line
from server.ops import signing_keys
from server.ops.restore import RestoreError, Result, restore
from server.ops.verify import verify
from server.store import Record
from server.store.memory import MemoryEventStore
from tests.support.forgery import fold, forged_game, placement, sealed

ROOT = Path(__file__).resolve().parents[2]
RETIRED = datetime(2026, 6, 1, tzinfo=UTC)
BEFORE = time_text(RETIRED - timedelta(days=1))
AFTER = time_text(RETIRED + timedelta(seconds=1))


def _keys(old: Signer, new: Signer) -> Keyring:
    return Keyring.of(new, [Trusted(old.public, retired_at=RETIRED)])


def test_a_rotation_records_the_old_keys_period_which_a_restart_reads_back(tmp_path: Path) -> None:
    settings = Settings(data_dir=str(tmp_path))
    first = signing_keys.load_signer(settings, create=True)
    assert first is not None
    made = datetime.fromtimestamp((tmp_path / "signing.key").stat().st_mtime, UTC)
    before = datetime.now(UTC) - timedelta(milliseconds=1)
    old, new = signing_keys.rotate(tmp_path / "signing.key")
    line = (tmp_path / "signing.key.retired").read_text().strip()
    assert re.fullmatch(rf"\S+ {old.key_id} made \S+Z retired \S+Z", line), line
    keys = signing_keys.keyring(settings, signing_keys.load_signer(settings, create=False))
    retired_at = keys.retired_at(old.key_id)
    assert retired_at is not None and before <= retired_at <= datetime.now(UTC)
    (listed,) = [k for k in keys.listing() if k.id == old.key_id]
    assert listed.retired_at == time_text(retired_at) and listed.made_at == time_text(made)
    assert keys.retired_at(new.key_id) is None and keys.listing()[0].id == new.key_id
    described = list(signing_keys.describe(keys))
    assert described[1].endswith(f"retired {time_text(retired_at)}"), described


def test_a_retired_key_listed_without_its_time_is_refused(tmp_path: Path) -> None:
    signing_keys.write_key(tmp_path / "signing.key", Signer.generate())
    (tmp_path / "signing.key.retired").write_text(f"# comment\n{Signer.generate().public_text()} abc\n")
    with pytest.raises(SigningKeyError, match="line 2: a retired key needs its time"):
        signing_keys.keyring(Settings(data_dir=str(tmp_path)), None)
    assert trusted_from_text(f"{Signer.generate().public_text()}@2026-06-01").retired_at == RETIRED
    with pytest.raises(SigningKeyError, match="not a retirement time"):
        trusted_from_text(f"{Signer.generate().public_text()}@June")


def test_a_node_whose_key_was_retired_does_not_start(tmp_path: Path) -> None:
    old = Signer.generate()
    settings = Settings(
        signing_key=old.private_text(), signing_retired_keys=f"{old.public_text()}@2026-06-01"
    )
    with pytest.raises(SigningKeyError, match=f"the signing key {old.key_id} was retired"):
        signing_keys.keyring(settings, old)


def test_a_retired_key_vouches_only_for_lines_dated_before_its_retirement() -> None:
    old, new = Signer.generate(), Signer.generate()
    for at, ok in ((BEFORE, True), (AFTER, False), (time_text(RETIRED), False)):
        lines, _ = forged_game(old, at, end=True)
        report = verify(lines, keys=_keys(old, new), complete=True)
        assert report.ok is ok, (at, report.problem)
        if ok:
            assert report.retired_key == old.key_id  # nothing newer vouches for it
        else:
            assert report.bad_version == 1 and "after its retirement" in (report.problem or "")
    # The trailer too: envelopes of before, a trailer the copy signed after.
    lines, _ = forged_game(old, BEFORE)
    records = [Record(version, line) for version, line in enumerate(lines[:-1], start=1)]
    late = trailer_line(_game(lines), records, AFTER, old)
    report = verify([*lines[:-1], late], keys=_keys(old, new), complete=True)
    assert (
        not report.ok
        and report.bad_version == len(lines)
        and "trailer: signed by key" in (report.problem or "")
    )


def test_no_line_of_a_retired_key_follows_one_of_its_successor() -> None:
    old, new = Signer.generate(), Signer.generate()
    lines, _ = forged_game(old, BEFORE)
    lines = lines[:-1]  # its envelopes, without the trailer
    keys = _keys(old, new)
    lines.append(sealed(new, lines, AFTER, "n-1", 0, placement(fold(lines), 0, "timpani", "n-1")))
    assert verify(lines, keys=keys).ok and verify(lines, keys=keys).retired_key is None
    forged = sealed(old, lines, BEFORE, "o-1", 1, placement(fold(lines), 1, "timpani", "o-1"))
    report = verify([*lines, forged], keys=keys)
    assert not report.ok and report.bad_version == len(lines) + 1
    assert f"key {old.key_id}" in (report.problem or "") and "after its successor" in (report.problem or "")


async def test_an_import_of_what_only_a_retired_key_vouches_for_needs_the_operators_date() -> None:
    old, new = Signer.generate(), Signer.generate()
    lines, _ = forged_game(old, BEFORE, end=True)
    store = MemoryEventStore()
    with pytest.raises(RestoreError, match="--allow-retired-before"):
        await restore(store, lines, keys=_keys(old, new))
    with pytest.raises(RestoreError, match="INVALID at version 1: dated") as refused:
        await restore(store, lines, keys=_keys(old, new), retired_before=RETIRED - timedelta(days=2))
    assert refused.value.bad_version == 1
    assert await store.read(_game(lines)) == []
    done = await restore(store, lines, keys=_keys(old, new), retired_before=RETIRED)
    assert done.result is Result.IMPORTED


async def test_a_game_its_new_key_went_on_with_imports_without_a_date() -> None:
    """The newer key's signatures chain to the old key's envelopes: they vouch for all before them."""
    old, new = Signer.generate(), Signer.generate()
    lines, _ = forged_game(old, BEFORE)
    lines = lines[:-1]
    (ended,) = decide(fold(lines).game, EndGame(seat=0, id="end"))
    lines.append(sealed(new, lines, AFTER, "end", 0, ended))
    store = MemoryEventStore()
    done = await restore(store, lines, keys=_keys(old, new))
    assert done.result is Result.IMPORTED and done.ended


def test_a_key_file_others_may_read_is_refused_unless_allowed(tmp_path: Path) -> None:
    path = tmp_path / "signing.key"
    signing_keys.write_key(path, Signer.generate())
    os.chmod(path, 0o644)
    with pytest.raises(SigningKeyError, match=r"group or others \(mode 0644\): chmod 600"):
        signing_keys.load_signer(Settings(data_dir=str(tmp_path)), create=True)
    allowed = Settings(data_dir=str(tmp_path), signing_key_readable=True)
    assert signing_keys.load_signer(allowed, create=False) is not None
    os.chmod(path, 0o640)
    with pytest.raises(SigningKeyError, match="mode 0640"):
        signing_keys.load_signer(Settings(signing_key_file=str(path)), create=False)
    os.chmod(path, 0o400)
    assert signing_keys.load_signer(Settings(signing_key_file=str(path)), create=False) is not None
    assert stat.S_IMODE(path.stat().st_mode) == 0o400


def test_the_examples_redis_password_is_refused_and_a_generated_one_is_not() -> None:
    examples = [
        line.split("=", 1)[1]
        for line in (ROOT / "deploy" / "orchestra.env").read_text().splitlines()
        if line.startswith("ORCHESTRA_REDIS_URL=")
    ]
    examples += re.findall(r'ORCHESTRA_REDIS_URL: "([^"]+)"', (ROOT / "deploy/k8s/secret.yaml").read_text())
    assert len(examples) == 2
    for url in [*examples, "redis://:Change_Me@host:6379/0", "rediss://user:my%20password@host/0"]:
        assert "placeholder word" in (redis_url_problem(url) or ""), url
    for fine in [
        None,
        "redis://127.0.0.1:6379/0",
        "redis://:3f9a1c0e7b2d4a5f8e6c@host:6379/0",
        "unix:///r.sock",
    ]:
        assert redis_url_problem(fine) is None, fine


def _game(lines: list[bytes]) -> str:
    return str(msgspec.json.decode(lines[0])["game_id"])
