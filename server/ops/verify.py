"""Integrity of a game's history: signatures, the hash chain, the versions, and the rules re-applied.

`verify(lines, keys=...)` takes the stored envelope bytes in order (as GET /games/{id}/events gives them,
one per line, optionally ending with the export's signed trailer) and reports the first bad version, if
any. Each envelope's proof (its inclusion path to a checkpoint its key signed; or, in games signed before
batches, its own signature) is checked first, with the trusted public keys `keys`: an envelope changed in
any way (its event, seat, command id, time, chain link, proof) is found at its own version, whatever else
was rewritten after it. The keyring checks each distinct checkpoint's signature once, so a run over many
games signed in the same batches costs a path of hashes per envelope and a signature per batch. A retired
key vouches only for envelopes dated before its retirement, and no envelope of a key retired earlier may
follow one of a newer key (`KeyOrder`): a copy of a retired key forges neither a game dated after its
retirement nor an envelope appended to a game the newer key signed. Each event
after the first (a placement, a take-back, the end) is then checked by deciding again the command it
records on the state before it, so even a history the server itself signed must follow the rules.

Completeness: a history that ends with a signed `GameEnded` is complete (nothing may follow it); a signed
trailer states the last version of an export; with `complete=True` a history with neither is reported as
possibly truncated. Envelopes dropped from the end of a stream before any copy was taken leave a history
that looks like a game in progress: `against(lines, earlier)` finds them against an earlier copy.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from domain import (
    ChairClaimed,
    ChairStolen,
    CloseSeat,
    EndGame,
    Event,
    GameCreated,
    GameEnded,
    NextGame,
    Place,
    PlacedBelowLine,
    PlacementTakenBack,
    PlayAgain,
    ReissueToken,
    Rejected,
    SeatClosed,
    SeatTaken,
    SeatTokenReissued,
    TakeBack,
    TakeSeat,
    decide,
)
from domain.rules import doubles
from domain.vocabulary import DOUBLING_SKILL, MATERIAL_CHOICE, MATERIALS, RULES_VERSION, Material
from projections import Board, View, apply
from server.engine.notary import proof_problem
from server.engine.signing import ENVELOPE, TRAILER, KeyOrder, Keyring
from server.engine.trailer import TRAILER_START, decode_trailer
from server.protocol import envelope


class Report(msgspec.Struct, frozen=True):
    """What a verification found: `ok`, the number of envelopes checked, the first bad version with why;
    whether the history ends with its signed end (`ended`), carries a valid trailer (`trailer`), and how
    many envelopes were accepted without a signature (`unsigned`, only with allow_unsigned); and, when
    the newest signature (the trailer's, else the last envelope's) is a retired key's, that key's id
    (`retired_key`: nothing newer vouches for the history, which only its copy holders can forge)."""

    ok: bool
    envelopes: int
    bad_version: int | None = None
    problem: str | None = None
    view: View | None = None
    ended: bool = False
    trailer: bool = False
    unsigned: int = 0
    retired_key: str | None = None


def verify(
    lines: Sequence[bytes],
    live_view: View | None = None,
    *,
    keys: Keyring,
    game_id: str | None = None,
    allow_unsigned: bool = False,
    complete: bool = False,
) -> Report:
    """Check a game's stored envelopes (and an export's trailer, when the last line is one).

    `keys`: the public keys trusted to have signed the envelopes. `game_id`: the game the history must be
    of (else the first envelope's). `allow_unsigned`: accept envelopes without a signature before the
    first signed one (games recorded before signing). `complete`: report a history that neither ends with
    a signed GameEnded nor carries a trailer as possibly truncated. `live_view`: compare the re-folded
    view with it.
    """
    trailer_line = lines[-1] if lines and lines[-1].startswith(TRAILER_START) else None
    lines = _without_trailer(lines)
    board = Board()
    chain_head = envelope.GENESIS
    signed = unsigned = 0
    order = KeyOrder(keys)
    for index, line in enumerate(lines):
        version = index + 1
        item, problem = _authentic(line, keys, allow_unsigned, after_signed=signed > 0)
        if item is None:
            return _bad(version, problem or "unreadable envelope", index)
        if item.sig is None and item.key is None:
            unsigned += 1
        else:
            signed += 1
            problem = order.problem(item.key or "", item.at)
            if problem is not None:
                return _bad(version, problem, index)
        game_id = game_id or item.game_id
        problem = _envelope_problem(item, version, chain_head, game_id)
        if problem is None:
            problem = _rule_problem(board, item.event, item.command_id or "", item.seat)
        if problem is not None:
            return _bad(version, problem, index)
        board = apply(board, item.event)
        chain_head = envelope.chain_hash(line)
    if not lines:
        return Report(ok=False, envelopes=0, bad_version=1, problem="no envelopes: no such game")
    count = len(lines)
    ended = board.game.ended
    if trailer_line is not None:
        problem = _trailer_problem(trailer_line, keys, order, game_id or "", count, chain_head, ended)
        if problem is not None:
            return Report(ok=False, envelopes=count, bad_version=count + 1, problem=problem, ended=ended)
    elif complete and not ended:
        problem = (
            f"truncated? the history stops at version {count} without a signed end (GameEnded) or a "
            "signed trailer: later envelopes may be missing"
        )
        return Report(ok=False, envelopes=count, bad_version=count + 1, problem=problem)
    if live_view is not None and msgspec.json.encode(live_view) != msgspec.json.encode(board.view):
        return Report(ok=False, envelopes=count, problem="the live view differs from the re-folded one")
    newest = order.newest
    return Report(
        ok=True,
        envelopes=count,
        view=board.view,
        ended=ended,
        trailer=trailer_line is not None,
        unsigned=unsigned,
        retired_key=newest if newest is not None and keys.retired_at(newest) is not None else None,
    )


def against(lines: Sequence[bytes], earlier: Sequence[bytes]) -> tuple[int, str] | None:
    """Where a history departs from an earlier copy of it (an export, an archive, a client's record):
    the first version the copy holds that the history lost or holds otherwise, and why; None when the
    history holds the copy's every envelope as they were. Verify the copy itself first: a copy is
    evidence only when its signatures hold."""
    envelopes = _without_trailer(lines)
    for version, line in enumerate(_without_trailer(earlier), start=1):
        if version > len(envelopes):
            return version, (
                f"truncated: an earlier copy holds version {version}, the history ends at {len(envelopes)}"
            )
        if envelopes[version - 1] != line:
            return version, "the envelope differs from the one an earlier copy holds"
    return None


def _without_trailer(lines: Sequence[bytes]) -> Sequence[bytes]:
    return lines[:-1] if lines and lines[-1].startswith(TRAILER_START) else lines


def _authentic(
    line: bytes, keys: Keyring, allow_unsigned: bool, after_signed: bool
) -> tuple[envelope.Envelope | None, str | None]:
    """The envelope a line holds, decoded from the bytes its proof or signature covers; or why it cannot
    be."""
    split = envelope.split_proof(line)
    if split is not None:  # signed in a batch: its body is the leaf the proof's path leads from
        body, proof = split
        try:
            item = envelope.decode(body)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            return None, f"unreadable envelope: {exc}"
        if item.key is None or item.sig is not None or item.proof is not None:
            return None, "a proof must follow the key, as the only field after it"
        problem = proof_problem(keys, item.key, body, proof)
        return (None, problem) if problem is not None else (item, None)
    try:
        item = envelope.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return None, f"unreadable envelope: {exc}"
    if item.sig is None and item.key is None:
        if after_signed:
            return None, "not signed, after signed envelopes (a signature was stripped)"
        if allow_unsigned:
            return item, None
        return None, "not signed (a game recorded before signing verifies only with allow_unsigned)"
    signed, problem = keys.check(ENVELOPE, line, item.key)
    if signed is None:
        return None, problem
    try:
        # What the signature covers is what counts: the line's sig field is all it may add.
        item = envelope.decode(signed)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return None, f"unreadable envelope: {exc}"
    if item.proof is not None:
        return None, "a line signed alone holds no proof"
    return item, None


def _trailer_problem(
    line: bytes, keys: Keyring, order: KeyOrder, game_id: str, count: int, chain_head: str, ended: bool
) -> str | None:
    try:
        trailer = decode_trailer(line)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return f"unreadable trailer: {exc}"
    _, problem = keys.check(TRAILER, line, trailer.key)
    if problem is None:
        problem = order.problem(trailer.key or "", trailer.at)
    if problem is not None:
        return f"trailer: {problem}"
    if trailer.game_id != game_id:
        return f"the trailer is of game {trailer.game_id!r}, not {game_id!r}"
    if trailer.version != count:
        if trailer.version > count:
            return (
                f"truncated: the signed trailer says version {trailer.version}, the history ends at {count}"
            )
        return f"the signed trailer says version {trailer.version}, the history goes on to {count}"
    if trailer.head != chain_head:
        return "the signed trailer's hash is not the hash of the last envelope"
    if trailer.ended != ended:
        return f"the signed trailer says ended={trailer.ended}; the history says {ended}"
    return None


def _bad(version: int, problem: str, index: int) -> Report:
    return Report(ok=False, envelopes=index, bad_version=version, problem=problem)


def _envelope_problem(item: envelope.Envelope, version: int, chain_head: str, game_id: str) -> str | None:
    if item.version != version:
        return f"envelope says version {item.version} at position {version}"
    if item.game_id != game_id:
        return f"envelope of game {item.game_id!r} in game {game_id!r}"
    if item.prev != chain_head:
        return "hash chain broken: prev is not the hash of the envelope before"
    if (version == 1) != isinstance(item.event, GameCreated):
        return "GameCreated must be the first event and only the first"
    return None


def _rule_problem(board: Board, event: Event, command_id: str, seat: int | None) -> str | None:
    """Decide again the command an event records; None when the rules give exactly that event."""
    if isinstance(event, GameCreated):
        # Every later event is decided again with this verifier's rules: a game recorded under other
        # rules cannot be vouched for by them (and a rewritten rules_version must not pass unnoticed).
        if event.rules_version != RULES_VERSION:
            return (
                f"recorded under rules version {event.rules_version}; these are rules version {RULES_VERSION}"
            )
        return None
    command = _command_of(board, event, command_id or "verify", seat)
    if command is None:
        return "the event names a space or seat the game does not have"
    # A seat's token is reissued by the host (no seat) or by a join, in the command taking the seat.
    joined = isinstance(event, SeatTokenReissued) and seat == event.seat
    if seat != command.seat and not joined:
        return f"envelope seat {seat} is not the event's seat {command.seat}"
    try:
        decided = decide(board.game, command)
    except Rejected as exc:
        return f"the rules reject what this event records ({exc.code}: {exc.message})"
    if decided != [event]:
        return f"the rules give {msgspec.json.encode(decided[0]).decode()}, not this event"
    return None


def _command_of(
    board: Board, event: Event, command_id: str, seat: int | None = None
) -> Place | EndGame | TakeBack | TakeSeat | CloseSeat | ReissueToken | PlayAgain | None:
    game = board.game
    try:
        if isinstance(event, SeatTaken):
            return TakeSeat(seat=event.seat, id=_safe_id(command_id), name=event.name)
        if isinstance(event, SeatClosed):
            return msgspec.convert({"target": event.seat, "id": _safe_id(command_id)}, CloseSeat)
        if isinstance(event, SeatTokenReissued):
            fields = {"target": event.seat, "id": _safe_id(command_id), "credential": event.credential}
            return msgspec.convert(fields, ReissueToken)
        if isinstance(event, NextGame):  # from a seat's play_again, or the host's (no seat)
            return PlayAgain(seat=seat, id=_safe_id(command_id), game_id=event.game_id)
    except msgspec.ValidationError:  # a seat out of range, a credential that is no hash
        return None
    if isinstance(event, GameEnded):
        return EndGame(seat=event.seat, id=_safe_id(command_id))
    if isinstance(event, PlacementTakenBack):
        # Decided again, it must name the same seat and the version of the placement it takes back.
        return TakeBack(seat=event.seat, id=_safe_id(command_id))
    assert not isinstance(event, GameCreated)
    space = game.layout.space(event.space) if game.layout is not None else None
    if space is None or not 0 <= event.seat < len(game.players):
        return None
    doubled = isinstance(event, ChairClaimed | ChairStolen) and event.doubled
    skill = DOUBLING_SKILL if doubled else 1
    consolation = "money"
    if isinstance(event, PlacedBelowLine) and "inspiration" in event.consolation:
        consolation = "inspiration"
    materials: tuple[Material, ...] | None = None
    if space.bonus.get(MATERIAL_CHOICE):
        gained = event.bonus if isinstance(event, ChairClaimed | ChairStolen) else {}
        factor = 2 if doubles(event.token, skill) else 1
        chosen = [m for m in MATERIALS for _ in range(gained.get(m, 0) - space.bonus.get(m, 0) * factor)]
        if not chosen:  # below the line: the choice was never used; any valid one decides the same
            needed = space.bonus[MATERIAL_CHOICE] * factor
            chosen = [MATERIALS[0]] * needed
        materials = tuple(chosen)
    return Place(
        seat=event.seat,
        id=_safe_id(command_id),
        token=event.token,
        space=event.space,
        skill=skill,
        consolation=consolation,  # type: ignore[arg-type]
        materials=materials,
    )


def _safe_id(command_id: str) -> str:
    return command_id if command_id else "verify"
