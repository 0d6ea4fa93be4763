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
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable

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


class PublicKey(msgspec.Struct, frozen=True):
    """A public key as listed by `GET /signing-keys`: its id, base64 raw key, and whether it signs now."""

    id: str
    public_key: str
    status: str  # "current" or "retired"


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


class Keyring:
    """The public keys a verifier trusts, by key id: the current one and any retired ones."""

    def __init__(self, keys: Iterable[Ed25519PublicKey] = (), current: str | None = None) -> None:
        self._keys: dict[str, Ed25519PublicKey] = {}
        for key in keys:
            self._keys[key_id(_raw_public(key))] = key
        self.current = current

    @classmethod
    def of(cls, signer: Signer, retired: Iterable[Ed25519PublicKey] = ()) -> Keyring:
        """The keyring of a node: its signer's public key (current) and the retired ones."""
        return cls([*retired, signer.public], current=signer.key_id)

    def __contains__(self, kid: object) -> bool:
        return kid in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def listing(self) -> list[PublicKey]:
        """Every key, the current one first, as `GET /signing-keys` lists them."""
        ordered = sorted(self._keys.items(), key=lambda item: item[0] != self.current)
        return [
            PublicKey(kid, base64.b64encode(_raw_public(key)).decode(), _status(kid == self.current))
            for kid, key in ordered
        ]

    def check(self, context: bytes, line: bytes, kid: str | None) -> tuple[bytes | None, str | None]:
        """The signed bytes of a line signed by key `kid`, or the problem with its signature."""
        if kid is None:
            return None, "not signed"
        key = self._keys.get(kid)
        if key is None:
            return None, f"signed by key {kid!r}, which is not one of the trusted keys"
        part = signed_part(line)
        if part is None:
            return None, "the signature is not at the end of the line, as base64"
        body, signature = part
        try:
            key.verify(signature, context + body)
        except InvalidSignature:
            return None, f"bad signature (key {kid}): the signed bytes were altered"
        return body, None


def _status(current: bool) -> str:
    return "current" if current else "retired"
