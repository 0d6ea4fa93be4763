"""What a holder of a copy of a signing key can write: whole games and appended envelopes, signed with it.

The events are decided by the real rules, so each forged line passes every check but the key's own
(its validity in time, and its order among the game's keys).
"""

from __future__ import annotations

from typing import Any

import msgspec

from domain import CreateGame, EndGame, Event, Game, GameCreated, Place, decide
from projections import Board, apply
from server import auth
from server.engine.envelope import seal
from server.engine.notary import signed_batch
from server.engine.signing import Signer
from server.engine.trailer import trailer_line
from server.protocol import envelope
from server.store import Record

PERF: dict[str, Any] = {"kind": "performance", "era": "classical"}
# What the forged layout pays on its first chair: a whole game's money in one placement.
FORGED_MONEY = 1000


def fold(lines: list[bytes]) -> Board:
    """The board of a game's stored envelopes."""
    board = Board()
    for line in lines:
        board = apply(board, envelope.decode(line).event)
    return board


def placement(board: Board, seat: int, space: str, command_id: str) -> Event:
    """The event the rules give for `seat` placing a performance token on `space`."""
    command = msgspec.convert(
        {"type": "place", "seat": seat, "id": command_id, "token": PERF, "space": space}, Place
    )
    (event,) = decide(board.game, command)
    return event


def sealed(
    signer: Signer, lines: list[bytes], at: str, command_id: str, seat: int | None, event: Event
) -> bytes:
    """The envelope of `event` after `lines` (chained to their last), signed by `signer`, dated `at`."""
    game_id = envelope.decode(lines[0]).game_id if lines else _game_id(event)
    chain_head = envelope.chain_hash(lines[-1]) if lines else envelope.GENESIS
    _, bodies, _ = seal(game_id, len(lines), chain_head, at, command_id, seat, [event], signer.key_id)
    return signed_batch(bodies, signer, at)[0]


def stored_line(item: envelope.Envelope) -> bytes:
    """The line a server would have stored for `item`, with its proof or signature as they are (so a
    re-encoded envelope whose fields did not change is its line again, byte for byte)."""
    if item.key is None:
        return envelope.encode(item)
    body = envelope.encode_body(msgspec.structs.replace(item, sig=None, proof=None))
    if item.proof is not None:
        return envelope.with_proof(body, envelope.encode(item.proof))
    return body[:-1] + b',"sig":' + envelope.encode(item.sig) + b"}"


def resigned(raw: dict[str, Any], signer: Signer, at: str | None = None) -> bytes:
    """The line of an envelope's JSON object `raw` (its proof or signature dropped), as `signer` signs it
    alone: a batch of one, dated `at` (else the envelope's own time)."""
    fields = {name: value for name, value in raw.items() if name not in ("key", "sig", "proof")}
    body = msgspec.json.encode({**fields, "key": signer.key_id})
    return signed_batch([body], signer, at or str(raw["at"]))[0]


def forged_game(signer: Signer, at: str, *, end: bool = False) -> tuple[list[bytes], list[str]]:
    """A whole archive of a game that never was, signed by `signer` and dated `at`: its layout pays
    FORGED_MONEY on the first chair of the viola, and its trailer carries the hashes of the forger's own
    seat tokens. The file's lines, and those tokens."""
    game_id = auth.new_game_id()
    (created,) = decide(Game(), CreateGame(game_id=game_id, players=("Eve", "Mallory")))
    raw = msgspec.to_builtins(created)
    for space in raw["layout"]["spaces"]:
        if space["id"] == "viola":
            space["bonus"]["money"] = FORGED_MONEY
    rich = msgspec.convert(raw, GameCreated)
    lines = [sealed(signer, [], at, f"create:{game_id}", None, rich)]
    for number, (seat, space) in enumerate([(0, "viola"), (1, "clarinet")], start=1):
        event = placement(fold(lines), seat, space, f"forged-{number}")
        lines.append(sealed(signer, lines, at, f"forged-{number}", seat, event))
    if end:
        (ended,) = decide(fold(lines).game, EndGame(seat=0, id="forged-end"))
        lines.append(sealed(signer, lines, at, "forged-end", 0, ended))
    tokens = [auth.new_token(), auth.new_token()]
    credentials = {auth.seat_key(seat): auth.digest(token) for seat, token in enumerate(tokens)}
    records = [Record(version, line) for version, line in enumerate(lines, start=1)]
    return [*lines, trailer_line(game_id, records, at, signer, credentials)], tokens


def _game_id(event: Event) -> str:
    assert isinstance(event, GameCreated)
    return event.game_id
