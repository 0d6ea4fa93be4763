"""Signing keys: where a node's key comes from, its file, rotation, and what a third party checks."""

from __future__ import annotations

import base64
import hashlib
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from server.config import Settings
from server.engine.signing import ENVELOPE, Keyring, Signer, SigningKeyError, signed_part
from server.ops import signing_keys


def test_a_signed_line_checks_with_any_ed25519_library_from_its_bytes_alone() -> None:
    signer = Signer.generate()
    line = signer.sign(
        ENVELOPE, b'{"game_id":"g","version":1,"key":"' + signer.key_id.encode() + b'","sig":null}'
    )
    # What protocol.md tells a third party: cut at the last ,"sig":", close with }, prefix the context.
    cut = line.rindex(b',"sig":"')
    signed = line[:cut] + b"}"
    signature = base64.b64decode(line[cut + len(b',"sig":"') : -2])
    public = Ed25519PublicKey.from_public_bytes(base64.b64decode(signer.public_text()))
    public.verify(signature, b"orchestra-envelope-v1\n" + signed)
    assert signed == b'{"game_id":"g","version":1,"key":"' + signer.key_id.encode() + b'"}'
    assert signer.key_id == hashlib.sha256(base64.b64decode(signer.public_text())).hexdigest()[:16]
    assert signed_part(line) == (signed, signature)


def test_a_signature_made_for_an_envelope_does_not_pass_for_another_kind_of_line() -> None:
    signer = Signer.generate()
    line = signer.sign(ENVELOPE, b'{"a":1,"key":"' + signer.key_id.encode() + b'","sig":null}')
    keys = Keyring.of(signer)
    assert keys.check(ENVELOPE, line, signer.key_id)[1] is None
    assert "bad signature" in (keys.check(b"orchestra-trailer-v1\n", line, signer.key_id)[1] or "")


def test_the_data_dirs_key_is_made_once_with_mode_0600_and_read_back(tmp_path: Path) -> None:
    settings = Settings(data_dir=str(tmp_path / "var"))
    assert signing_keys.load_signer(settings, create=False) is None
    made = signing_keys.load_signer(settings, create=True)
    assert made is not None
    path = tmp_path / "var" / "signing.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_bytes().startswith(
        b"-----BEGIN PRIVATE KEY"
    )
    again = signing_keys.load_signer(settings, create=True)
    assert again is not None and again.key_id == made.key_id


def test_the_key_itself_wins_over_the_file_and_a_named_file_must_exist(tmp_path: Path) -> None:
    given = Signer.generate()
    settings = Settings(data_dir=str(tmp_path), signing_key=given.private_text())
    loaded = signing_keys.load_signer(settings, create=True)
    assert loaded is not None and loaded.key_id == given.key_id
    assert not (tmp_path / "signing.key").exists()
    missing = Settings(data_dir=str(tmp_path), signing_key_file=str(tmp_path / "shared.key"))
    with pytest.raises(SigningKeyError, match="does not exist"):
        signing_keys.load_signer(missing, create=True)
    with pytest.raises(SigningKeyError):
        signing_keys.load_signer(Settings(signing_key="not a key"), create=True)


def test_a_pem_key_file_named_by_the_settings_is_used(tmp_path: Path) -> None:
    shared = Signer.generate()
    path = tmp_path / "shared.key"
    signing_keys.write_key(path, shared)
    loaded = signing_keys.load_signer(Settings(signing_key_file=str(path)), create=False)
    assert loaded is not None and loaded.key_id == shared.key_id


def test_a_data_dir_that_cannot_hold_the_key_says_which_settings_to_use(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(SigningKeyError, match="ORCHESTRA_SIGNING_KEY"):
        signing_keys.load_signer(Settings(data_dir=str(blocker / "var")), create=True)


def test_rotation_retires_the_old_public_key_beside_the_file_and_keeps_it_trusted(tmp_path: Path) -> None:
    settings = Settings(data_dir=str(tmp_path))
    first = signing_keys.load_signer(settings, create=True)
    assert first is not None
    old, new = signing_keys.rotate(tmp_path / "signing.key")
    assert old.key_id == first.key_id != new.key_id
    current = signing_keys.load_signer(settings, create=False)
    assert current is not None and current.key_id == new.key_id
    assert stat.S_IMODE((tmp_path / "signing.key").stat().st_mode) == 0o600
    keys = signing_keys.keyring(settings, current)
    assert [(k.id, k.status) for k in keys.listing()] == [(new.key_id, "current"), (old.key_id, "retired")]
    assert old.public_text() in (tmp_path / "signing.key.retired").read_text()


def test_retired_keys_may_also_be_given_as_a_setting_each_with_its_time() -> None:
    retired = [Signer.generate(), Signer.generate()]
    current = Signer.generate()
    settings = Settings(
        signing_key=current.private_text(),
        signing_retired_keys=",".join(
            f"{s.public_text()}@2026-0{n}-01T00:00:00Z" for n, s in enumerate(retired, 1)
        ),
    )
    keys = signing_keys.keyring(settings, current)
    assert all(s.key_id in keys for s in [current, *retired]) and keys.current == current.key_id
    assert keys.retired_at(retired[1].key_id) == datetime(2026, 2, 1, tzinfo=UTC)
    with pytest.raises(SigningKeyError):
        signing_keys.keyring(Settings(signing_retired_keys="nope@2026-01-01"), current)
    with pytest.raises(SigningKeyError, match="without its retirement time"):
        signing_keys.keyring(Settings(signing_retired_keys=retired[0].public_text()), current)
