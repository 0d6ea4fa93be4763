"""Where a node's signing key comes from, its retired public keys, and rotating them in a key file.

The key is, in this order: ORCHESTRA_SIGNING_KEY (the key itself: base64 of its 32 raw bytes, for nodes
that get their secrets as variables); the PEM file ORCHESTRA_SIGNING_KEY_FILE, which must exist; else
`<data_dir>/signing.key`, made (mode 0600) on the first start. A key file readable by group or others is
refused unless ORCHESTRA_SIGNING_KEY_READABLE is set.

Retired public keys, which still verify what they signed before their retirement, are listed one per
line in `<key file>.retired`, each with its period:

    <base64 public key> <key id> made <time> retired <time>

(`made <time>` is shown only, and may be missing; the retirement time is what verifiers hold the key to;
times are ISO 8601, UTC). ORCHESTRA_SIGNING_RETIRED_KEYS lists more, comma-separated, as `<base64
key>@<time of retirement>`. A retired key listed without its time is refused: it would vouch for any
time, which is what retiring it must end.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from server.config import Settings
from server.engine.signing import (
    Keyring,
    Signer,
    SigningKeyError,
    Trusted,
    parse_time,
    public_key_from_text,
    time_text,
    trusted_from_text,
)

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
        return _read(path, private=not settings.signing_key_readable)
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


def retired_keys(settings: Settings) -> list[Trusted]:
    """The retired public keys, each with its retirement time, that the settings and the key file's
    `.retired` list. Raises: SigningKeyError (a key that does not parse, or listed without its time)."""
    found: list[Trusted] = []
    if settings.signing_retired_keys:
        for text in settings.signing_retired_keys.replace(",", " ").split():
            trusted = trusted_from_text(text)
            if trusted.retired_at is None:
                raise SigningKeyError(
                    f"ORCHESTRA_SIGNING_RETIRED_KEYS lists {text[:20]}... without its retirement time: write "
                    "it <key>@<time it stopped signing>, for example @2026-11-30T15:49:33Z"
                )
            found.append(trusted)
    listed = retired_file(key_file(settings))
    if not settings.signing_key and listed.exists():
        found += _listed(listed)
    return found


def keyring(settings: Settings, signer: Signer | None) -> Keyring:
    """The keys a node (or a verifier on its machine) trusts: `signer`'s, current, and the retired ones.

    Raises: SigningKeyError (a retired key that does not parse or has no time; `signer`'s key retired).
    """
    retired = retired_keys(settings)
    if signer is None:
        return Keyring(retired)
    for trusted in retired:
        if trusted.id == signer.key_id and trusted.retired_at is not None:
            raise SigningKeyError(
                f"the signing key {signer.key_id} was retired at {time_text(trusted.retired_at)}: what it "
                "signs now would not verify; give the node its new key"
            )
    made = None
    path = key_file(settings)
    if not settings.signing_key and path.exists():
        made = datetime.fromtimestamp(path.stat().st_mtime, UTC)  # the file is replaced whole when made
    return Keyring.of(signer, retired, made_at=made)


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
    made = datetime.fromtimestamp(path.stat().st_mtime, UTC)
    retire(path, old.public_text(), datetime.now(UTC), made=made)
    fresh = path.with_name(path.name + ".new")
    fresh.unlink(missing_ok=True)
    write_key(fresh, new)
    os.replace(fresh, path)  # atomic: a node starting now reads the old key or the new one, never half
    return old, new


def retire(path: Path, public: str, when: datetime, made: datetime | None = None) -> Trusted:
    """Record public key `public` (base64) as retired at `when` in the `.retired` file beside key file
    `path` (made if missing): from then on it vouches only for what is dated before `when`.

    Raises: SigningKeyError (not a public key), OSError.
    """
    trusted = Trusted(public_key_from_text(public), retired_at=when, made_at=made)
    period = f"made {time_text(made)} " if made is not None else ""
    with open(retired_file(path), "a") as listed:
        listed.write(f"{public.strip()} {trusted.id} {period}retired {time_text(when)}\n")
        listed.flush()
        os.fsync(listed.fileno())
    return trusted


def describe(keys: Keyring) -> Iterable[str]:
    """Lines for people: each key's id, status and base64 public key, then its period when known."""
    for key in keys.listing():
        period = [f"made {key.made_at}"] if key.made_at else []
        period += [f"retired {key.retired_at}"] if key.retired_at else []
        yield " ".join([f"{key.id} {key.status:<8} {key.public_key}", *period])


def _read(path: Path, private: bool = False) -> Signer:
    """The key in file `path`; with `private`, refused when group or others may read it."""
    try:
        with open(path, "rb") as file:
            mode = stat.S_IMODE(os.fstat(file.fileno()).st_mode)
            if private and mode & 0o077:
                raise SigningKeyError(
                    f"{path} may be read by group or others (mode {mode:04o}): chmod 600 it (owned by the "
                    "server's user), or set ORCHESTRA_SIGNING_KEY_READABLE=true to accept it"
                )
            return Signer.from_text(file.read())
    except SigningKeyError as exc:
        raise SigningKeyError(f"{path}: {exc}") from exc


def _listed(path: Path) -> list[Trusted]:
    """The retired keys of a `.retired` file (its lines not blank nor comments), each with its period.

    Raises: SigningKeyError.
    """
    found: list[Trusted] = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        times = dict(zip(words[1:], words[2:], strict=False))
        try:
            retired = parse_time(times["retired"])
            made = parse_time(times["made"]) if "made" in times else None
        except (KeyError, ValueError) as exc:
            raise SigningKeyError(
                f"{path}, line {number}: a retired key needs its time, as `<key> <id> retired "
                "2026-11-30T15:49:33Z`"
            ) from exc
        found.append(Trusted(public_key_from_text(words[0]), retired_at=retired, made_at=made))
    return found
