"""Where a node's signing key comes from, its retired public keys, and rotating them in a key file.

The key is, in this order: ORCHESTRA_SIGNING_KEY (the key itself: base64 of its 32 raw bytes, for nodes
that get their secrets as variables); the PEM file ORCHESTRA_SIGNING_KEY_FILE, which must exist; else
`<data_dir>/signing.key`, made (mode 0600) on the first start. Retired public keys, which still verify
the games they signed, are listed one per line in `<key file>.retired` and in
ORCHESTRA_SIGNING_RETIRED_KEYS (comma-separated).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from server.config import Settings
from server.engine.signing import Keyring, Signer, SigningKeyError, public_key_from_text

log = logging.getLogger(__name__)

DEFAULT_NAME = "signing.key"
RETIRED_SUFFIX = ".retired"


def key_file(settings: Settings) -> Path:
    """The key file the settings name, or the data directory's."""
    if settings.signing_key_file:
        return Path(settings.signing_key_file)
    return Path(settings.data_dir) / DEFAULT_NAME


def retired_file(path: Path) -> Path:
    """The file of retired public keys beside a key file."""
    return path.with_name(path.name + RETIRED_SUFFIX)


def load_signer(settings: Settings, *, create: bool) -> Signer | None:
    """The node's signing key; with `create`, the data directory's default key is made if missing.

    None when there is no key and `create` is false. Raises: SigningKeyError (a key that does not parse,
    a named key file that does not exist, a key file that cannot be written).
    """
    if settings.signing_key:
        return Signer.from_text(settings.signing_key)
    path = key_file(settings)
    if path.exists():
        return _read(path)
    if settings.signing_key_file:
        raise SigningKeyError(f"ORCHESTRA_SIGNING_KEY_FILE names {path}, which does not exist")
    if not create:
        return None
    signer = Signer.generate()
    try:
        write_key(path, signer)
    except FileExistsError:  # another process made it first: use theirs
        return _read(path)
    except OSError as exc:
        raise SigningKeyError(
            f"cannot write the signing key {path} ({exc.strerror}): set ORCHESTRA_SIGNING_KEY or "
            "ORCHESTRA_SIGNING_KEY_FILE"
        ) from exc
    if settings.redis_url is not None:
        log.warning(
            "signing key made for this node only: nodes sharing a Redis must share one key "
            "(ORCHESTRA_SIGNING_KEY or ORCHESTRA_SIGNING_KEY_FILE)",
            extra={"path": str(path), "key_id": signer.key_id},
        )
    else:
        log.info("signing key made", extra={"path": str(path), "key_id": signer.key_id})
    return signer


def retired_keys(settings: Settings) -> list[Ed25519PublicKey]:
    """The retired public keys the settings and the key file's `.retired` list. Raises: SigningKeyError."""
    texts: list[str] = []
    if settings.signing_retired_keys:
        texts += [part for part in settings.signing_retired_keys.replace(",", " ").split() if part]
    listed = retired_file(key_file(settings))
    if not settings.signing_key and listed.exists():
        texts += _listed(listed.read_text())
    return [public_key_from_text(text) for text in texts]


def keyring(settings: Settings, signer: Signer | None) -> Keyring:
    """The keys a node (or a verifier on its machine) trusts: `signer`'s, current, and the retired ones."""
    retired = retired_keys(settings)
    if signer is None:
        return Keyring(retired)
    return Keyring.of(signer, retired)


def write_key(path: Path, signer: Signer) -> None:
    """Write a new key file (PEM, mode 0600); never over an existing one. Raises: FileExistsError, OSError."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # a new directory holding a secret: private
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(signer.pem())
        out.flush()
        os.fsync(out.fileno())


def rotate(path: Path) -> tuple[Signer, Signer]:
    """Retire the key in `path` (its public key appended to `<path>.retired`) and put a new one there.

    The old key's private half is gone afterwards: it signs nothing more, its public key still verifies.
    Returns (old, new). Raises: SigningKeyError (no key there), OSError.
    """
    if not path.exists():
        raise SigningKeyError(f"no signing key at {path}")
    old, new = _read(path), Signer.generate()
    with open(retired_file(path), "a") as listed:
        when = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        listed.write(f"{old.public_text()} {old.key_id} retired {when}\n")
        listed.flush()
        os.fsync(listed.fileno())
    fresh = path.with_name(path.name + ".new")
    fresh.unlink(missing_ok=True)
    write_key(fresh, new)
    os.replace(fresh, path)  # atomic: a node starting now reads the old key or the new one, never half
    return old, new


def describe(keys: Keyring) -> Iterable[str]:
    """Lines for people: each key's id, status and base64 public key."""
    for key in keys.listing():
        yield f"{key.id} {key.status:<8} {key.public_key}"


def _read(path: Path) -> Signer:
    try:
        return Signer.from_text(path.read_bytes())
    except SigningKeyError as exc:
        raise SigningKeyError(f"{path}: {exc}") from exc


def _listed(text: str) -> list[str]:
    """The public keys of a `.retired` file: the first word of each line that is not blank or a comment."""
    return [line.split()[0] for line in text.splitlines() if line.strip() and not line.startswith("#")]
