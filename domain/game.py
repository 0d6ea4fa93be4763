"""The game aggregate: its state, `decide` (command -> events) and `evolve` (state + event -> state)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import assert_never

import msgspec
from msgspec.structs import replace

from domain.errors import (
    BadRequest,
    CannotTakeBack,
    Forbidden,
    GameNotOver,
    GameOver,
    GameStarted,
    IllegalSpace,
    LimitReached,
    MissingChoice,
    NextGameExists,
    SeatHasName,
    SeatIsClosed,
    StaleVersion,
    TableNotFull,
    UnknownGame,
)
from domain.layout import Layout, SpaceDef
from domain.layouts import BUILTIN_LAYOUTS
from domain.messages import (
    Amounts,
    ChairClaimed,
    ChairStolen,
    CloseSeat,
    Command,
    CreateGame,
    EndGame,
    Event,
    GameCreated,
    GameEnded,
    InstrumentToken,
    NextGame,
    Place,
    PlacedBelowLine,
    PlacementEvent,
    PlacementTakenBack,
    PlayAgain,
    Rank,
    ReissueToken,
    Score,
    SeatClosed,
    SeatTaken,
    SeatTokenReissued,
    TakeBack,
    TakeSeat,
    Token,
)
from domain.names import player_names, seat_name
from domain.rules import (
    add,
    canonical,
    chair_bonus,
    describe,
    doubles,
    is_instrument,
    join_ids,
    legal_spaces,
    materials_needed,
    may_go,
)
from domain.vocabulary import CONSOLATIONS, RULES_VERSION


class Seated(msgspec.Struct, frozen=True, gc=False):
    """A token in the Orchestra and the seat that placed it."""

    seat: int
    token: Token


# The distinct (seat, token) pairs of a game are few (4 seats x some 20 tokens) while a long game places
# thousands of tokens: sharing one Seated per pair keeps a game's state to a pointer per placed token.
# A cache of immutable values: `seated` is still a pure function.
_SEATED: dict[tuple[int, Token], Seated] = {}
_SEATED_MAX = 4096


def seated(seat: int, token: Token) -> Seated:
    """The Seated value for this seat and token (one shared instance per distinct pair)."""
    key = (seat, token)
    found = _SEATED.get(key)
    if found is None:
        found = Seated(seat, token)
        if len(_SEATED) < _SEATED_MAX:
            _SEATED[key] = found
    return found


class SpaceState(msgspec.Struct, frozen=True, gc=False):
    """What lies in one space: the chair and the tokens below the line, or a rare space's chairs.

    Two tallies per seat ride along, so that neither the majority rule nor the scores ever scan a space's
    history: a game with 10,000 events decides as fast as a new one.
    """

    chair: Seated | None = None
    below: tuple[Seated, ...] = ()
    chairs: tuple[Seated, ...] = ()
    rare: bool = False
    # Per seat: performance and repair tokens in this space, chair and below the line together.
    contest: tuple[int, ...] = ()
    # Per seat: First Chairs held in this space (0 or 1 on a standard space, any number on a rare one).
    held: tuple[int, ...] = ()


class Game(msgspec.Struct, frozen=True, gc=False):
    """The state of one game, folded from its events. `Game()` is a game not yet created.

    Never mutated: `evolve` returns a new Game (the `spaces` dict is copied, never changed in place).
    `placements` counts the placements and take-backs of the game: what its placement limit bounds.
    `undo` is there while the last event is a placement: who made it and the state before it, which a
    take-back restores. Only the last placement can be taken back, so one earlier state is all a game
    keeps (it shares every space the placement did not touch).
    `players` holds None for an open seat; `closed` the closed seats (in order); `open_table` whether
    anyone may join; `reissued` each seat's token hash since the host reissued it; `next_game` the game
    that follows this ended one; `follows` the game this one follows.
    """

    game_id: str = ""
    version: int = 0
    layout: Layout | None = None
    players: tuple[str | None, ...] = ()
    spectators: str = "public"
    max_placements: int = 1000
    rules_version: int = RULES_VERSION
    placements: int = 0
    ended: bool = False
    spaces: Mapping[str, SpaceState] = msgspec.field(default_factory=dict)
    resources: tuple[Amounts, ...] = ()
    undo: Undo | None = None
    closed: tuple[int, ...] = ()
    open_table: bool = False
    reissued: Mapping[int, str] = msgspec.field(default_factory=dict)
    next_game: str | None = None
    follows: str | None = None

    @property
    def full(self) -> bool:
        """Whether every seat has a name or is closed (placements wait for it)."""
        return all(name is not None or seat in self.closed for seat, name in enumerate(self.players))

    def open_seats(self) -> tuple[int, ...]:
        """The seats still open (no name, not closed), lowest first."""
        return tuple(
            seat for seat, name in enumerate(self.players) if name is None and seat not in self.closed
        )


class Undo(msgspec.Struct, frozen=True, gc=False):
    """The game's last event, while it is a placement: the seat that made it and the state before it
    (whose own `undo` is always None: a game keeps one earlier state, never a chain)."""

    seat: int
    before: Game


def decide(state: Game, command: Command, layouts: Mapping[str, Layout] = BUILTIN_LAYOUTS) -> list[Event]:
    """Return the events `command` causes on `state`.

    Raises:
        Rejected: one of its leaves, with the code protocol.md gives; nothing changes.
    """
    match command:
        case CreateGame():
            return [_create(state, command, layouts)]
        case Place():
            return [_place(state, command)]
        case EndGame():
            return [_end(state, command)]
        case TakeBack():
            return [_take_back(state, command)]
        case TakeSeat():
            taken = _take_seat(state, command)
            if command.credential is None:
                return [taken]
            return [taken, SeatTokenReissued(seat=command.seat, credential=command.credential)]
        case CloseSeat():
            return [_close_seat(state, command)]
        case ReissueToken():
            return [_reissue(state, command)]
        case PlayAgain():
            return [_play_again(state, command)]
        case _:
            assert_never(command)


def evolve(state: Game, event: Event) -> Game:
    """Return the state after `event`. Total: events are facts, so nothing is validated here."""
    version = state.version + 1
    match event:
        case GameCreated():
            zeros = tuple(0 for _ in event.players)
            return Game(
                game_id=event.game_id,
                version=version,
                layout=event.layout,
                players=event.players,
                spectators=event.spectators,
                max_placements=event.max_placements,
                rules_version=event.rules_version,
                closed=tuple(sorted(event.closed)),
                open_table=event.open,
                follows=event.follows,
                spaces={
                    s.id: SpaceState(rare=s.rare, contest=zeros, held=zeros) for s in event.layout.spaces
                },
                resources=tuple({} for _ in event.players),
            )
        case ChairClaimed(seat=seat, space=space_id, token=token, bonus=gained):
            held = state.spaces[space_id]
            placed = seated(seat, token)
            if held.rare:
                held = replace(held, chairs=(*held.chairs, placed))
            else:
                held = replace(held, chair=placed)
            held = replace(held, contest=_tally(held.contest, seat, token), held=_bump(held.held, seat, 1))
            return _placed(state, version, space_id, held, seat, gained)
        case ChairStolen(seat=seat, space=space_id, token=token, bonus=gained):
            held = state.spaces[space_id]
            counts = _bump(held.held, seat, 1)
            below = held.below
            if held.chair is not None:
                below = (*below, held.chair)
                counts = _bump(counts, held.chair.seat, -1)
            held = replace(
                held,
                chair=seated(seat, token),
                below=below,
                contest=_tally(held.contest, seat, token),
                held=counts,
            )
            return _placed(state, version, space_id, held, seat, gained)
        case PlacedBelowLine(seat=seat, space=space_id, token=token, consolation=gained):
            held = state.spaces[space_id]
            held = replace(
                held, below=(*held.below, seated(seat, token)), contest=_tally(held.contest, seat, token)
            )
            return _placed(state, version, space_id, held, seat, gained)
        case GameEnded():
            return replace(state, version=version, ended=True, undo=None)
        case PlacementTakenBack():
            if state.undo is None:  # no placement to take back: not a fact `decide` gives; counted only
                return replace(state, version=version, placements=state.placements + 1)
            return replace(state.undo.before, version=version, placements=state.placements + 1)
        # The seat events: none is a placement, so each ends the take-back of the one before it.
        case SeatTaken(seat=seat, name=name):
            players = (*state.players[:seat], name, *state.players[seat + 1 :])
            return replace(state, version=version, players=players, undo=None)
        case SeatClosed(seat=seat):
            closed = tuple(sorted({*state.closed, seat}))
            return replace(state, version=version, closed=closed, undo=None)
        case SeatTokenReissued(seat=seat, credential=credential):
            reissued = {**state.reissued, seat: credential}
            return replace(state, version=version, reissued=reissued, undo=None)
        case NextGame(game_id=next_id):
            return replace(state, version=version, next_game=next_id, undo=None)
        case _:
            assert_never(event)


def fold(events: Iterable[Event], state: Game | None = None) -> Game:
    """The state after `events`: exactly `functools.reduce(evolve, events, state)`, computed in one pass.

    Replaying a stored game is the hot path of rebuilds and views-at-a-version; building one immutable
    Game per event costs far more than decoding the event, so this keeps local accumulators and freezes
    them once at the end. A placement is folded in only once the next event is known not to be its
    take-back (a placement taken back is then never folded in at all), and the last one by `evolve`, so
    that the state keeps what a take-back needs. A property test holds it equal to `evolve`.
    """
    work = _Work(Game() if state is None else state)
    spaces, resources = work.spaces, work.resources
    counted = 0  # placements and take-backs folded since `work` was made (one version each)
    pending: PlacementEvent | None = None
    for event in events:
        if pending is not None:
            if type(event) is PlacementTakenBack:
                pending = None
                counted += 2
                continue
            placed = _SEATED.get((pending.seat, pending.token)) or seated(pending.seat, pending.token)
            space = spaces[pending.space]
            if type(pending) is PlacedBelowLine:
                gained = pending.consolation
                space.below.append(placed)
            else:
                assert type(pending) is ChairClaimed or type(pending) is ChairStolen
                gained = pending.bonus
                if space.rare:
                    space.chairs.append(placed)
                else:
                    holder = space.chair
                    if holder is not None:
                        space.below.append(holder)
                        space.held[holder.seat] -= 1
                    space.chair = placed
                space.held[placed.seat] += 1
            seat = placed.seat
            if type(placed.token) is not InstrumentToken:
                space.contest[seat] += 1
            total = resources[seat]
            for key in gained:
                total[key] = total.get(key, 0) + gained[key]
            counted += 1
            pending = None
        if type(event) is PlacedBelowLine or type(event) is ChairClaimed or type(event) is ChairStolen:
            pending = event
        elif type(event) is GameEnded:
            work.ended = True
            work.version += 1
        else:
            # GameCreated, or a take-back whose placement came before these events: rare, so by evolve.
            work.count(counted)
            counted = 0
            work = _Work(evolve(work.freeze(), event))
            spaces, resources = work.spaces, work.resources
    work.count(counted)
    game = work.freeze()
    return game if pending is None else evolve(game, pending)


class _Space:
    """A space's state while `fold` works on it."""

    __slots__ = ("chair", "below", "chairs", "rare", "contest", "held")

    def __init__(self, state: SpaceState) -> None:
        self.chair = state.chair
        self.below = list(state.below)
        self.chairs = list(state.chairs)
        self.rare = state.rare
        self.contest = list(state.contest)
        self.held = list(state.held)

    def freeze(self) -> SpaceState:
        return SpaceState(
            self.chair,
            tuple(self.below),
            tuple(self.chairs),
            self.rare,
            tuple(self.contest),
            tuple(self.held),
        )


class _Work:
    """A game's state while `fold` works on it."""

    def __init__(self, game: Game) -> None:
        self.game = game
        self.version, self.placements, self.ended = game.version, game.placements, game.ended
        self.spaces = {space_id: _Space(held) for space_id, held in game.spaces.items()}
        self.resources = [dict(amounts) for amounts in game.resources]

    def count(self, placements: int) -> None:
        """Count placements and take-backs folded in, one version each."""
        self.placements += placements
        self.version += placements

    def freeze(self) -> Game:
        """The state folded so far: the game it began with when nothing was folded, else a new Game
        whose last event was folded here, so no placement of it can be taken back (`fold` leaves its last
        placement to `evolve`)."""
        if self.version == self.game.version:
            return self.game
        return replace(
            self.game,
            version=self.version,
            placements=self.placements,
            ended=self.ended,
            spaces={space_id: space.freeze() for space_id, space in self.spaces.items()},
            resources=tuple(canonical(amounts) for amounts in self.resources),
            undo=None,
        )


def scores(state: Game) -> tuple[Score, ...]:
    """Each seat's First Chairs (in layout order), prestige from them, and resources gained."""
    chairs: list[list[str]] = [[] for _ in state.players]
    prestige = [0 for _ in state.players]
    for space in _layout(state).spaces:
        for seat, count in enumerate(state.spaces[space.id].held):
            if count:
                chairs[seat].extend([space.id] * count)
                prestige[seat] += space.prestige * count
    return tuple(
        Score(seat=seat, chairs=tuple(chairs[seat]), prestige=prestige[seat], resources=state.resources[seat])
        for seat in range(len(state.players))
    )


def ranking(final: tuple[Score, ...], closed: tuple[int, ...] = ()) -> tuple[Rank, ...]:
    """Seats by prestige; equal prestige shares a rank and the next rank skips (1, 1, 3). A closed seat
    took no part: it is left out."""
    playing = [s for s in final if s.seat not in closed]
    ordered = sorted(playing, key=lambda s: (-s.prestige, s.seat))
    return tuple(
        Rank(seat=s.seat, rank=1 + sum(o.prestige > s.prestige for o in playing), prestige=s.prestige)
        for s in ordered
    )


# decide, one command at a time --------------------------------------------------------------------


def _create(state: Game, command: CreateGame, layouts: Mapping[str, Layout]) -> GameCreated:
    if state.layout is not None:
        raise BadRequest(f"game {state.game_id!r} already exists")
    if not 1 <= len(command.players) <= 4:
        raise BadRequest("a game needs 1 to 4 players")
    if command.open and command.spectators != "public":
        raise BadRequest("an open table is public: anyone may take a seat, so anyone may watch")
    players = player_names(command.players)
    layout = layouts.get(command.layout)
    if layout is None:
        raise BadRequest(f"unknown layout {command.layout!r}; known: {join_ids(sorted(layouts))}")
    return GameCreated(
        game_id=command.game_id,
        players=players,
        layout=layout,
        spectators=command.spectators,
        max_placements=command.max_placements,
        rules_version=RULES_VERSION,
        open=command.open,
    )


def _place(state: Game, command: Place) -> Event:
    layout = _created(state)
    space = layout.space(command.space)
    token = command.token
    # The frame: every id must name something on this board, every choice must fit the placement.
    if space is None:
        raise BadRequest(f"{command.space!r} is not a space; spaces are {join_ids(layout.space_ids)}")
    if isinstance(token, InstrumentToken) and token.instrument not in layout.instruments:
        raise BadRequest(
            f"{token.instrument!r} is not an instrument; instruments are {join_ids(layout.instruments)}"
        )
    if not 1 <= command.skill <= 10:
        raise BadRequest("skill must be 1 to 10")
    needed = materials_needed(space, token, command.skill)
    chosen = command.materials or ()
    if command.materials is not None and not needed:  # even an empty list: rules.md §5 names no exception
        raise BadRequest(f"materials are only named for a space that pays a material; {space.id} does not")
    if chosen and len(chosen) != needed:
        raise BadRequest(f"this placement in {space.id} names {needed} material(s), not {len(chosen)}")
    # Access, then the game, then the rule, then the choices (protocol.md's order).
    _check_seat(state, command.seat)
    _check_game(state, command.expected_version)
    _check_full(state)
    if state.placements >= state.max_placements:
        raise LimitReached(f"the game holds its maximum of {state.max_placements} placements")
    if not may_go(space, token):
        where = legal_spaces(layout, token)
        raise IllegalSpace(f"{describe(token)} cannot go to {space.id}; it may go to {join_ids(where)}")
    if needed and not chosen:
        raise MissingChoice(
            f"a placement in {space.id} must name {needed} material(s): wood, metal or animal"
        )
    return _resolve(state, space, command)


def _resolve(state: Game, space: SpaceDef, command: Place) -> Event:
    """The First Chair algorithm of rules.md §5."""
    seat, token = command.seat, command.token
    doubled = doubles(token, command.skill)
    bonus = chair_bonus(space, doubled, command.materials or ())
    consolation = dict(CONSOLATIONS[command.consolation])
    held = state.spaces[space.id]
    if space.rare or held.chair is None:
        return ChairClaimed(seat=seat, space=space.id, token=token, bonus=bonus, doubled=doubled)
    holder = held.chair
    if is_instrument(holder.token):
        return PlacedBelowLine(
            seat=seat, space=space.id, token=token, consolation=consolation, reason="instrument_holds"
        )
    if is_instrument(token):
        return ChairStolen(
            seat=seat,
            space=space.id,
            token=token,
            bonus=bonus,
            from_seat=holder.seat,
            reason="instrument",
            doubled=doubled,
        )
    if holder.seat == seat:
        # No steal from yourself: otherwise a player could collect the same bonus again and again.
        return PlacedBelowLine(
            seat=seat, space=space.id, token=token, consolation=consolation, reason="own_chair"
        )
    counts = list(held.contest)
    counts[seat] += 1
    if all(counts[seat] > count for other, count in enumerate(counts) if other != seat):
        return ChairStolen(
            seat=seat, space=space.id, token=token, bonus=bonus, from_seat=holder.seat, reason="majority"
        )
    return PlacedBelowLine(
        seat=seat, space=space.id, token=token, consolation=consolation, reason="no_majority"
    )


def _take_back(state: Game, command: TakeBack) -> PlacementTakenBack:
    _created(state)
    # Access, then the game, then the rule (protocol.md's order), as for a placement.
    _check_seat(state, command.seat)
    _check_game(state, command.expected_version)
    if state.placements >= state.max_placements:
        # A take-back counts as a placement: placing and taking back cannot grow a stream without bound.
        raise LimitReached(f"the game holds its maximum of {state.max_placements} placements")
    undo = state.undo
    if undo is None:
        raise CannotTakeBack(
            f"the game's last event (version {state.version}) is not a placement: only a placement that "
            "is still the game's last event can be taken back"
        )
    if undo.seat != command.seat:
        raise CannotTakeBack(
            f"the game's last placement (version {state.version}) is seat {undo.seat}'s: only your own "
            "placement can be taken back"
        )
    return PlacementTakenBack(seat=command.seat, version=state.version)


def _end(state: Game, command: EndGame) -> GameEnded:
    _created(state)
    _check_seat(state, command.seat)
    first = min(seat for seat in range(len(state.players)) if seat not in state.closed)
    if command.seat != first:
        why = "" if first == 0 else " (the first seat not closed)"
        raise Forbidden(f"only the player in seat {first}{why} may end the game")
    _check_game(state, command.expected_version)
    _check_full(state)
    final = scores(state)
    return GameEnded(seat=command.seat, scores=final, ranking=ranking(final, state.closed))


def _take_seat(state: Game, command: TakeSeat) -> SeatTaken:
    _created(state)
    _check_seat(state, command.seat)
    _check_game(state, None)
    if state.players[command.seat] is not None:
        raise SeatHasName(f"seat {command.seat} is {state.players[command.seat]}'s already")
    return SeatTaken(seat=command.seat, name=seat_name(command.seat, command.name, state.players))


def _close_seat(state: Game, command: CloseSeat) -> SeatClosed:
    _created(state)
    seat = _target(state, command.target)
    _check_game(state, None)
    if state.placements:
        raise GameStarted("a placement was made: seats can no longer be closed")
    if state.players[seat] is not None:
        raise SeatHasName(f"seat {seat} is {state.players[seat]}'s: only an open seat can be closed")
    if len(state.closed) + 1 == len(state.players):
        raise BadRequest("a game keeps at least one seat that is not closed")
    return SeatClosed(seat=seat)


def _reissue(state: Game, command: ReissueToken) -> SeatTokenReissued:
    _created(state)
    seat = _target(state, command.target)
    _check_game(state, None)
    return SeatTokenReissued(seat=seat, credential=command.credential)


def _play_again(state: Game, command: PlayAgain) -> NextGame:
    _created(state)
    if command.seat is not None:
        _check_seat(state, command.seat)
    if not state.ended:
        raise GameNotOver("the game has not ended: play again once it has")
    if state.next_game is not None:
        raise NextGameExists(f"the next game is {state.next_game}", state.next_game)
    return NextGame(game_id=command.game_id)


def next_game(state: Game, game_id: str) -> GameCreated:
    """The first event of the game that follows this ended one: the same seats (closed ones closed),
    names, layout, spectators, openness and placement limit."""
    return GameCreated(
        game_id=game_id,
        players=state.players,
        layout=_layout(state),
        spectators="token" if state.spectators == "token" else "public",
        max_placements=state.max_placements,
        rules_version=RULES_VERSION,
        open=state.open_table,
        closed=state.closed,
        follows=state.game_id,
    )


def _created(state: Game) -> Layout:
    if state.layout is None:
        raise UnknownGame("no such game")
    return state.layout


def _check_seat(state: Game, seat: int) -> None:
    if not 0 <= seat < len(state.players):
        raise Forbidden(f"seat {seat} is not a seat of this game")
    if seat in state.closed:
        raise SeatIsClosed(f"seat {seat} was closed: it takes no part in this game")


def _target(state: Game, seat: int) -> int:
    """The seat a host's command names, checked: a seat of this game, not closed."""
    if not 0 <= seat < len(state.players):
        raise BadRequest(f"seat {seat} is not a seat of this game (seats 0 to {len(state.players) - 1})")
    if seat in state.closed:
        raise SeatIsClosed(f"seat {seat} was closed: it takes no part in this game")
    return seat


def _check_full(state: Game) -> None:
    if not state.full:
        seats = ", ".join(str(seat) for seat in state.open_seats())
        raise TableNotFull(f"seat(s) {seats} still open: play starts once every seat has a name or is closed")


def _check_game(state: Game, expected_version: int | None) -> None:
    if state.ended:
        raise GameOver("the game has ended")
    if expected_version is not None and expected_version != state.version:
        raise StaleVersion(f"the game is at version {state.version}, not {expected_version}")


# evolve helpers -------------------------------------------------------------------------------------


def _layout(state: Game) -> Layout:
    assert state.layout is not None, "a created game has a layout"
    return state.layout


def _tally(contest: tuple[int, ...], seat: int, token: Token) -> tuple[int, ...]:
    return contest if is_instrument(token) else _bump(contest, seat, 1)


def _bump(counts: tuple[int, ...], seat: int, by: int) -> tuple[int, ...]:
    return (*counts[:seat], counts[seat] + by, *counts[seat + 1 :])


def _placed(state: Game, version: int, space_id: str, held: SpaceState, seat: int, gained: Amounts) -> Game:
    resources = list(state.resources)
    resources[seat] = add(resources[seat], gained)
    before = state if state.undo is None else replace(state, undo=None)
    return replace(
        state,
        version=version,
        placements=state.placements + 1,
        spaces={**state.spaces, space_id: held},
        resources=tuple(resources),
        undo=Undo(seat, before),
    )
