"""A small Python client for the Orchestra server, used by tests, bots, benchmarks and replay tools.

    async with await GameClient.connect("http://127.0.0.1:8000", game_id, token=seat_token) as game:
        answer = await game.place({"kind": "performance", "era": "classical"}, "viola")
        async for frame in game.frames():   # live `events` frames, in order
            ...

It speaks protocol v1: hello (with `since` to resume; by default live frames carry view deltas, what
changed, which it applies to `client.view`; `view="full"` for whole views, `view=False` for none),
commands answered by id (`place`, `take_back` of the seat's last placement while it is the game's last
event, `end_game`, `take_seat` of an open seat, `play_again` once the game ended), `events` frames;
`client.next_game` (and `await client.wait_for_next_game()`) holds the next game a `next_game` frame named.
When the connection drops (not when the server refuses it), it reconnects by itself with `since` set
to the last version it saw and re-sends unanswered commands with their ids, which the server answers
once.

Presence: `client.presence` holds who is at the table (`seats`, each with `online`, and `spectators`),
from the `presence` frames that follow the welcome and each change (they update it and are not yielded
by `next_frame` or `frames`); `await client.wait_for_presence(check)` waits for a state.

The wall feed (`orchestra_client.wall`): `await WallClient.connect(base_url)` keeps `wall.games`, every
public game on the server's wall (live ones, then the most recently ended), current from the feed's
changes (`apply_wall_changes`), and connects again by itself after a drop.

HTTP helpers: `await create_game(base_url, ["Ada", None], open=True)` (the seats and their secret
tokens, shown once, and the host's token; None: an open seat), `await join_game(base_url, game_id,
"Ben")` (an open table's lowest open seat), `await open_tables(base_url)`, the host's `reissue_token`,
`close_seat` and `next_game`, `await get_view(base_url, game_id, at=N)`, `await get_presence(base_url,
game_id)` and `await get_events(base_url, game_id, after=N)`.

Verifying (`orchestra_client.verify`, docs/protocol.md section 7): `keys = await
SigningKeys.fetch(base_url)` (GET /signing-keys), then `verify_envelope(envelope, keys)` is
`Verified(ok=True)` when the server's key wrote the envelope as it is (its proof's path to the signed
root, the checkpoint's signature; each checkpoint checked once per `keys`), else says why in `problem`.
`GameClient.connect(..., verify=True)` checks every envelope it receives, and its chain, and ends the
session at the first that fails (`client.unverified`).

Demo bots (`client.bots`): `await play_bot(base_url, game_id, seat_token, pace=(0.5, 1.5), rng_seed=1,
max_placements=12)` places random legal tokens (the domain's own `legal_spaces` on the layout of the
game's `GameCreated`, with Rare Strings materials when needed, worker skill 1..8) at that pace until the
game ends or the quota is done; the bot of seat 0 then ends the game. `orchestra demo` runs three of
them (Ada, Ben, Cy) against a server it starts, and prints the link to watch them
(`orchestra_client.demo.play_demo`).
"""

from orchestra_client.http import (
    close_seat,
    create_game,
    get_events,
    get_presence,
    get_view,
    join_game,
    next_game,
    open_tables,
    reissue_token,
)
from orchestra_client.session import (
    ConnectionRefused,
    DeltaMismatch,
    GameClient,
    Json,
    apply_delta,
)
from orchestra_client.verify import SigningKeys, Verified, verify_envelope
from orchestra_client.wall import WallClient, apply_wall_changes

__all__ = [
    "Json",
    "ConnectionRefused",
    "DeltaMismatch",
    "GameClient",
    "SigningKeys",
    "Verified",
    "WallClient",
    "apply_delta",
    "apply_wall_changes",
    "close_seat",
    "create_game",
    "get_events",
    "get_presence",
    "get_view",
    "join_game",
    "next_game",
    "open_tables",
    "reissue_token",
    "verify_envelope",
]
