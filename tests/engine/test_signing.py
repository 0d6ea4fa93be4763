"""Signing keys: where a node's key comes from, its file, rotation, and what a third party checks."""

from __future__ import annotations

import base64
import hashlib
import stat
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
    assert signed_part(line) == (signed, signature, None)


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


def test_retired_keys_may_also_be_given_as_a_setting() -> None:
    retired = [Signer.generate(), Signer.generate()]
    current = Signer.generate()
    settings = Settings(
        signing_key=current.private_text(), signing_retired_keys=",".join(s.public_text() for s in retired)
    )
    keys = signing_keys.keyring(settings, current)
    assert all(s.key_id in keys for s in [current, *retired]) and keys.current == current.key_id
    with pytest.raises(SigningKeyError):
        signing_keys.keyring(Settings(signing_retired_keys="nope"), current)


def _unsigned(signer: Signer, n: int) -> bytes:
    return b'{"game_id":"g%d","version":1,"key":"' % n + signer.key_id.encode() + b'","sig":null}'


def test_a_batch_shares_one_signature_and_each_line_checks_alone_with_its_path() -> None:
    signer = Signer.generate()
    lines = signer.sign_batch(ENVELOPE, [_unsigned(signer, n) for n in range(5)])
    keys = Keyring.of(signer)
    parts = [signed_part(line) for line in lines]
    assert all(part is not None and part.path for part in parts)
    assert len({part.signature for part in parts if part is not None}) == 1
    for n, line in enumerate(lines):
        assert keys.check(ENVELOPE, line, signer.key_id) == (
            _unsigned(signer, n)[: -len(',"sig":null}')] + b"}",
            None,
        )
    # What protocol.md tells a third party, for a line of a batch.
    cut = lines[3].rindex(b',"sig":"')
    signature, path = (base64.b64decode(part) for part in lines[3][cut + len(b',"sig":"') : -2].split(b"."))
    node = hashlib.sha256(b"\x00orchestra-envelope-v1\n" + lines[3][:cut] + b"}").digest()
    for start in range(0, len(path), 33):
        sibling = path[start + 1 : start + 33]
        pair = sibling + node if path[start] == 0 else node + sibling
        node = hashlib.sha256(b"\x01" + pair).digest()
    public = Ed25519PublicKey.from_public_bytes(base64.b64decode(signer.public_text()))
    public.verify(signature, b"orchestra-batch-v1\n" + node)


def test_a_batch_of_one_is_signed_as_a_line_alone() -> None:
    signer = Signer.generate()
    (line,) = signer.sign_batch(ENVELOPE, [_unsigned(signer, 1)])
    assert line == signer.sign(ENVELOPE, _unsigned(signer, 1))  # Ed25519 signatures are deterministic
    assert b"." not in line[line.rindex(b',"sig":"') :]


def test_a_changed_line_a_swapped_path_or_a_bare_root_signature_fails_its_check() -> None:
    signer = Signer.generate()
    keys = Keyring.of(signer)
    lines = signer.sign_batch(ENVELOPE, [_unsigned(signer, n) for n in range(4)])
    changed = lines[1].replace(b'"version":1', b'"version":2')
    assert "bad signature" in (keys.check(ENVELOPE, changed, signer.key_id)[1] or "")
    paths = [line[line.rindex(b".") :] for line in lines]
    swapped = lines[1][: lines[1].rindex(b".")] + paths[2]
    assert "bad signature" in (keys.check(ENVELOPE, swapped, signer.key_id)[1] or "")
    bare = lines[1][: lines[1].rindex(b".")] + b'"}'  # the root's signature, as if over the line alone
    assert "bad signature" in (keys.check(ENVELOPE, bare, signer.key_id)[1] or "")
    cut = lines[1][: lines[1].rindex(b".")] + b"." + base64.b64encode(b"\x07" + b"x" * 32) + b'"}'
    assert "malformed" in (keys.check(ENVELOPE, cut, signer.key_id)[1] or "")
    # A batch signed for envelopes does not pass for another kind of line.
    assert "bad signature" in (keys.check(b"orchestra-trailer-v1\n", lines[0], signer.key_id)[1] or "")
