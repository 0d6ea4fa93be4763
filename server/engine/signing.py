"""Ed25519 signatures of stored envelopes (and export trailers): signing, key ids, and checking a line.

A signed line is the JSON object of its body (every field, `key` last) with one more field appended,
`"sig"`, holding the base64 Ed25519 signature of a context string followed by the body's bytes:

    line        = body[:-1] + ',"sig":"' + base64(signature) + '"}'
    signature   = Ed25519(private key, context + body)

so the signed bytes are the line cut at its last `,"sig":"` and closed with `}`: any Ed25519 library can
check them, and no JSON is ever encoded again to check a signature. The context keeps a signature made
for one kind of line (an envelope, an export's trailer) from passing for another.

A key's id is the first 16 hex digits of the SHA-256 of its raw 32-byte public key, so anyone holding a
public key can tell which lines it signed.

A key has a time: a retired key (`retired_at`) vouches only for lines dated before its retirement, and
keys follow one another, so a game's lines signed by a key retired earlier never come after one of a key
retired later (or still current). A copy of a key taken before it was retired can then sign nothing a
verifier takes as written after the retirement, nor anything after the newer key's lines.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable
from datetime import UTC, datetime

import msgspec
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

ENVELOPE = b"orchestra-envelope-v1\n"
TRAILER = b"orchestra-trailer-v1\n"
_MARK = b',"sig":"'
_UNSIGNED_END = b',"sig":null}'


class SigningKeyError(ValueError):
    """A key that is not an Ed25519 key in one of the accepted forms."""


def key_id(public: bytes) -> str:
    """The short id of a raw 32-byte public key."""
    return hashlib.sha256(public).hexdigest()[:16]


def _raw_public(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def public_key_from_text(text: str) -> Ed25519PublicKey:
    """A public key from its base64 raw form (what `GET /signing-keys` and `orchestra signing-key` show).

    Raises: SigningKeyError.
    """
    try:
        raw = base64.b64decode(text.strip(), validate=True)
        return Ed25519PublicKey.from_public_bytes(raw)
    except (binascii.Error, ValueError) as exc:
        raise SigningKeyError(f"not a base64 Ed25519 public key: {text[:20]!r}...") from exc


def parse_time(text: str) -> datetime:
    """An ISO 8601 time (`2026-11-30T15:49:33.254Z`; UTC unless it says otherwise). Raises: ValueError."""
    when = datetime.fromisoformat(text.strip())
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def time_text(when: datetime) -> str:
    """A time as envelopes write it: UTC, ISO 8601 with milliseconds and `Z`."""
    return when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def trusted_from_text(text: str) -> Trusted:
    """A public key with its retirement time, `KEY@TIME` (`KEY` alone: not retired, of any time), as
    `--public-key` and ORCHESTRA_SIGNING_RETIRED_KEYS give them.

    Raises: SigningKeyError.
    """
    key, _, when = text.strip().partition("@")
    if not when:
        return Trusted(public_key_from_text(key))
    try:
        retired = parse_time(when)
    except ValueError as exc:
        raise SigningKeyError(f"not a retirement time (ISO 8601): {when[:40]!r}") from exc
    return Trusted(public_key_from_text(key), retired_at=retired)


class PublicKey(msgspec.Struct, frozen=True):
    """A public key as listed by `GET /signing-keys`: its id, base64 raw key, whether it signs now, and
    its period (`made_at`, when known; `retired_at`: it vouches only for lines dated before)."""

    id: str
    public_key: str
    status: str  # "current" or "retired"
    made_at: str | None = None
    retired_at: str | None = None


class Trusted(msgspec.Struct, frozen=True):
    """A public key with its period: made at (when known, shown only) and retired at (None: not
    retired, it vouches for lines of any time)."""

    key: Ed25519PublicKey
    retired_at: datetime | None = None
    made_at: datetime | None = None

    @property
    def id(self) -> str:
        """The key's id."""
        return key_id(_raw_public(self.key))


class Signer:
    """An Ed25519 private key that signs lines, and its key id."""

    __slots__ = ("key_id", "public", "_private")

    def __init__(self, private: Ed25519PrivateKey) -> None:
        self._private = private
        self.public = private.public_key()
        self.key_id = key_id(_raw_public(self.public))

    @classmethod
    def generate(cls) -> Signer:
        """A signer with a fresh random key."""
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_text(cls, text: str | bytes) -> Signer:
        """A signer from a PEM (PKCS#8) private key, or the base64 of its 32 raw bytes.

        Raises: SigningKeyError.
        """
        data = text.encode() if isinstance(text, str) else text
        try:
            if data.lstrip().startswith(b"-----BEGIN"):
                private = serialization.load_pem_private_key(data, password=None)
            else:
                private = Ed25519PrivateKey.from_private_bytes(base64.b64decode(data.strip(), validate=True))
        except (binascii.Error, ValueError, TypeError) as exc:
            raise SigningKeyError("not an Ed25519 private key (PEM, or base64 of its 32 raw bytes)") from exc
        if not isinstance(private, Ed25519PrivateKey):
            raise SigningKeyError("the PEM key is not an Ed25519 key")
        return cls(private)

    def pem(self) -> bytes:
        """The private key as PEM (PKCS#8), as `openssl genpkey -algorithm ed25519` writes it."""
        return self._private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    def private_text(self) -> str:
        """The private key as the base64 of its 32 raw bytes (for ORCHESTRA_SIGNING_KEY)."""
        raw = self._private.private_bytes(
            serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
        )
        return base64.b64encode(raw).decode()

    def public_text(self) -> str:
        """The public key as the base64 of its 32 raw bytes."""
        return base64.b64encode(_raw_public(self.public)).decode()

    def signature(self, data: bytes) -> str:
        """The base64 Ed25519 signature of `data` (a checkpoint's text)."""
        return base64.b64encode(self._private.sign(data)).decode()

    def sign(self, context: bytes, unsigned: bytes) -> bytes:
        """The signed line of `unsigned`: a JSON object whose last two fields are `"key":"<this key's id>"`
        and `"sig":null`, as the envelope and trailer structs encode with their key set and no sig."""
        if not unsigned.endswith(_UNSIGNED_END):
            raise ValueError("a line to sign must end with its sig field, null")
        body = unsigned[: -len(_UNSIGNED_END)]
        signature = self._private.sign(context + body + b"}")
        return body + _MARK + base64.b64encode(signature) + b'"}'


def signed_part(line: bytes) -> tuple[bytes, bytes] | None:
    """The signed bytes of a line and its signature, or None when the line carries no signature."""
    cut = line.rfind(_MARK)
    if cut < 0 or not line.endswith(b'"}'):
        return None
    try:
        signature = base64.b64decode(line[cut + len(_MARK) : -2], validate=True)
    except binascii.Error:
        return None
    return line[:cut] + b"}", signature


# Checkpoints a keyring remembers as checked: a verification run meets each batch's checkpoint once per
# envelope of the batch, across games; past this many, it forgets them all and checks anew.
CHECKED_CHECKPOINTS = 65_536


class Keyring:
    """The public keys a verifier trusts, by key id: the current one and any retired ones, each with its
    period. It remembers the checkpoints whose signatures it has checked, so a run checks each once."""

    def __init__(self, keys: Iterable[Ed25519PublicKey | Trusted] = (), current: str | None = None) -> None:
        self._keys: dict[str, Trusted] = {}
        for key in keys:
            trusted = key if isinstance(key, Trusted) else Trusted(key)
            self._keys[trusted.id] = trusted
        self.current = current
        self._checked: set[tuple[str, bytes, str]] = set()
        self.checkpoints_checked = 0  # checkpoint signatures verified, not remembered

    @classmethod
    def of(
        cls,
        signer: Signer,
        retired: Iterable[Ed25519PublicKey | Trusted] = (),
        made_at: datetime | None = None,
    ) -> Keyring:
        """A node's keyring: its signer's public key (current, made at `made_at`) and the retired ones."""
        return cls([*retired, Trusted(signer.public, made_at=made_at)], current=signer.key_id)

    def __contains__(self, kid: object) -> bool:
        return kid in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def retired_at(self, kid: str) -> datetime | None:
        """When key `kid` was retired; None for a key not retired (or not known)."""
        trusted = self._keys.get(kid)
        return trusted.retired_at if trusted is not None else None

    def listing(self) -> list[PublicKey]:
        """Every key, the current one first, then the retired ones, newest first, as `GET /signing-keys`
        lists them."""
        ordered = sorted(self._keys.items(), key=lambda item: (item[0] != self.current, -_rank(item[1])))
        return [
            PublicKey(
                kid,
                base64.b64encode(_raw_public(trusted.key)).decode(),
                _status(kid == self.current),
                made_at=time_text(trusted.made_at) if trusted.made_at is not None else None,
                retired_at=time_text(trusted.retired_at) if trusted.retired_at is not None else None,
            )
            for kid, trusted in ordered
        ]

    def check(self, context: bytes, line: bytes, kid: str | None) -> tuple[bytes | None, str | None]:
        """The signed bytes of a line signed by key `kid`, or the problem with its signature."""
        if kid is None:
            return None, "not signed"
        trusted = self._keys.get(kid)
        if trusted is None:
            return None, f"signed by key {kid!r}, which is not one of the trusted keys"
        part = signed_part(line)
        if part is None:
            return None, "the signature is not at the end of the line, as base64"
        body, signature = part
        try:
            trusted.key.verify(signature, context + body)
        except InvalidSignature:
            return None, f"bad signature (key {kid}): the signed bytes were altered"
        return body, None

    def check_checkpoint(self, kid: str, text: bytes, signature: str) -> str | None:
        """The problem with a checkpoint's signature by key `kid` over `text`; None when it holds."""
        if (kid, text, signature) in self._checked:
            return None
        trusted = self._keys.get(kid)
        if trusted is None:
            return f"signed by key {kid!r}, which is not one of the trusted keys"
        self.checkpoints_checked += 1
        try:
            trusted.key.verify(base64.b64decode(signature, validate=True), text)
        except (InvalidSignature, binascii.Error, ValueError):
            return f"bad checkpoint signature (key {kid}): the checkpoint or the signature was altered"
        if len(self._checked) >= CHECKED_CHECKPOINTS:
            self._checked.clear()
        self._checked.add((kid, text, signature))
        return None


class KeyOrder:
    """The keys of one game's lines, checked in their order: a retired key vouches only for lines dated
    before its retirement, and no line of a key retired earlier comes after a line of a newer key."""

    __slots__ = ("_keys", "_newest", "_newest_rank")

    def __init__(self, keys: Keyring) -> None:
        self._keys = keys
        self._newest: str | None = None
        self._newest_rank = float("-inf")

    @property
    def newest(self) -> str | None:
        """The newest key that signed a line so far (the one whose signature vouches for all before)."""
        return self._newest

    def problem(self, kid: str, at: str) -> str | None:
        """Why the next line, signed by `kid` (a key of the keyring, its signature checked) and dated
        `at`, cannot be one its key vouches for; None when it can."""
        retired = self._keys.retired_at(kid)
        if retired is not None:
            try:
                when = parse_time(at)
            except ValueError:
                return (
                    f"signed by key {kid}, retired at {time_text(retired)}, and dated {at[:40]!r}, not a time"
                )
            if when >= retired:
                return (
                    f"signed by key {kid} and dated {at}, after its retirement at {time_text(retired)}: "
                    "a retired key vouches only for what it signed before"
                )
        rank = retired.timestamp() if retired is not None else float("inf")
        if rank < self._newest_rank:
            assert retired is not None  # only a retired key ranks below another
            return (
                f"signed by key {kid}, retired at {time_text(retired)}, after a line of key {self._newest}, "
                "a newer key: a retired key signs nothing after its successor"
            )
        self._newest, self._newest_rank = kid, rank
        return None


def _rank(trusted: Trusted) -> float:
    return trusted.retired_at.timestamp() if trusted.retired_at is not None else float("inf")


def _status(current: bool) -> str:
    return "current" if current else "retired"
