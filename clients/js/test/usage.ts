// A typed use of the library: `npx tsc -p tsconfig.json` checks it against orchestra.d.ts (never run).
// The `@ts-expect-error` lines are mistakes the types must catch.

import {
  applyDelta,
  applyWallChanges,
  closeSeat,
  connect,
  connectWall,
  createGame,
  describeToken,
  getEvents,
  getLegal,
  getPresence,
  getSigningKeys,
  getView,
  joinGame,
  listGames,
  nextGame,
  openTables,
  OrchestraError,
  reissueToken,
  verifyEnvelope,
  type Accepted,
  type ClientFrame,
  type Envelope,
  type Token,
  type View,
  type ViewDelta,
  type WallChangesFrame,
  type WallPageFrame,
  type WebSocketConstructor,
} from "../orchestra.js";
import { WebSocket as NodeWebSocket } from "ws";

// In Node 20, which has no global WebSocket: the ws package's constructor is one the library takes.
const WebSocket: WebSocketConstructor = NodeWebSocket;
declare const console: { log(...values: unknown[]): void }; // no lib "dom": the types need none

export async function play(baseUrl: string): Promise<number> {
  const created = await createGame(baseUrl, { players: ["Ada", "Ben"], private: true });
  const seat = created.seats[0];
  if (seat === undefined) return 0;
  const game = await connect(baseUrl, created.game_id, { token: seat.token, since: 0, WebSocket });
  const role: "player" | "spectator" = game.role;
  const log: Envelope[] = [];
  const off = game.on("events", (envelopes, frame) => {
    log.push(...envelopes);
    if (frame.view_delta) frame.view_delta.score_changes.forEach((change) => change.held);
  });
  game.on("view", (view: View) => view.scores.map((score) => score.prestige));
  game.on("close", ({ code, reason }) => console.log(code, reason));
  game.on("rejected", (frame) => frame.code === "bad_request");
  game.on("presence", (presence) => presence.seats.filter((seat) => seat.online).length + presence.spectators);
  const online: boolean | undefined = game.presence?.seats[0]?.online;

  const performance: Token = { kind: "performance", era: "classical" };
  const accepted: Accepted = await game.place({ token: performance, space: "viola", consolation: "inspiration" });
  await game.place({ token: { kind: "instrument", instrument: "rare_strings" }, space: "rare_strings", skill: 6, materials: ["wood", "metal"] });
  try {
    await game.endGame({ expected_version: accepted.version });
  } catch (error) {
    if (error instanceof OrchestraError && error.code === "stale_version") console.log(error.frame?.message);
  }
  for (const [id, space] of Object.entries(game.view.spaces)) {
    if (space.kind === "standard") console.log(id, space.chair?.seat, space.below.length);
    else console.log(id, space.chairs.length);
  }
  off();
  const legal = await getLegal(baseUrl, created.game_id, performance, { skill: 2, token: created.watch_token ?? null });
  const view = await getView(baseUrl, created.game_id, { at: 2, token: seat.token });
  const events = await getEvents(baseUrl, created.game_id, { after: 1, token: seat.token });
  const games = await listGames(baseUrl, { limit: 10 });
  const watching: number = (await getPresence(baseUrl, created.game_id, { token: seat.token })).spectators;
  console.log(online, watching, games[0]?.presence.seats.length);
  console.log(describeToken(performance), describeToken(performance, { short: true }), legal.materials, games.length);
  const keys = await getSigningKeys(baseUrl);
  if (events[0]) {
    const checked = await verifyEnvelope(events[0], keys);
    if (!checked.ok) console.log(checked.problem.toUpperCase(), events[0].proof?.root, keys.keys[0]?.retired_at);
    await verifyEnvelope(events[0], keys.keys);
    // @ts-expect-error: the keys, not the key's id
    await verifyEnvelope(events[0], keys.current);
  }
  const first = events[0]?.event;
  if (first?.type === "ChairStolen") console.log(first.from_seat, first.reason);
  if (first?.type === "PlacementTakenBack") console.log(first.seat, first.version);
  const placed = game.lastPlacement;
  if (placed) {
    console.log(placed.event.space, describeToken(placed.event.token), game.lastEnvelope?.version);
    try {
      await game.takeBack({ expected_version: placed.version });
    } catch (error) {
      if (error instanceof OrchestraError && error.code === "cannot_take_back") console.log(error.version);
    }
  }
  const info = await game.close();
  console.log(info.code, role, view.version);
  return game.version;
}

export async function wall(baseUrl: string): Promise<number> {
  const feed = await connectWall(baseUrl, { WebSocket, resumeFor: Infinity });
  for (const game of feed.games.values()) {
    console.log(game.game_id, game.chairs["viola"]?.[0], game.prestige[0], game.layout.spaces.length, game.ended);
  }
  feed.on("changes", ({ added, changed, retired }, frame: WallChangesFrame) => {
    console.log(added.length, changed.map((change) => change.version ?? 0), retired, frame.type);
  });
  feed.on("wall", (games) => console.log(games.size));
  // @ts-expect-error: the wall feed has no envelopes
  feed.on("events", () => undefined);
  const next = applyWallChanges(feed.games, {
    type: "wall_changes",
    retired: [],
    added: [],
    changed: [{ game_id: "g", ended: true, chairs: { viola: [1] } }],
    total: 1,
  });
  feed.on("page", (games, frame: WallPageFrame) => console.log(games.length, frame.total, feed.total));
  const asked: boolean = feed.more();
  const info = await feed.close();
  console.log(info.code, feed.endedKept, asked);
  return next.size;
}

export async function table(baseUrl: string): Promise<string> {
  const created = await createGame(baseUrl, { players: ["Ada", null, null], open: true });
  const open = (await openTables(baseUrl)).filter((listed) => listed.open_seats.length > 0);
  const joined: { seat: number; token: string } = await joinGame(baseUrl, created.game_id, "Ben");
  const fresh: string = await reissueToken(baseUrl, created.game_id, joined.seat, created.host_token);
  const closed = await closeSeat(baseUrl, created.game_id, 2, created.host_token);
  const game = await connect(baseUrl, created.game_id, { token: fresh, WebSocket });
  try {
    await game.takeSeat("Ben", { id: "name-1" });
  } catch (error) {
    if (error instanceof OrchestraError && (error.code === "seat_taken" || error.code === "seat_closed")) {
      console.log(error.frame?.message);
    }
  }
  game.on("next_game", (next) => console.log(next.game_id, next.token ?? "no token"));
  try {
    await game.playAgain();
  } catch (error) {
    if (error instanceof OrchestraError && error.code === "game_not_over") console.log(error.version);
  }
  const frames: ClientFrame[] = [
    { type: "take_seat", id: "c1", name: "Cy" },
    { type: "play_again", id: "c2" },
  ];
  const next: string = await nextGame(baseUrl, created.game_id, created.host_token);
  console.log(open.length, closed.version, game.nextGame?.game_id, frames.length);
  await game.close();
  return next;
}

export function follow(view: View, delta: ViewDelta): View {
  return applyDelta(view, delta);
}

export async function mistakes(baseUrl: string): Promise<void> {
  const game = await connect(baseUrl, "g", { view: "full" });
  // @ts-expect-error: an era the rules do not have
  await game.place({ token: { kind: "performance", era: "modern" }, space: "viola" });
  // @ts-expect-error: a place needs its space
  await game.place({ token: { kind: "repair", family: "winds" } });
  // @ts-expect-error: the seat is the token's, never a field
  await game.place({ token: { kind: "repair", family: "winds" }, space: "oboe", seat: 0 });
  // @ts-expect-error: no such event
  game.on("message", () => undefined);
  // @ts-expect-error: a take-back names no placement: it is always the seat's last one
  await game.takeBack({ version: 3 });
  // @ts-expect-error: a view mode the server does not know
  await connect(baseUrl, "g", { view: "bogus" });
  // @ts-expect-error: createGame needs its players
  await createGame(baseUrl, {});
  // @ts-expect-error: take_seat needs the name
  await game.send({ type: "take_seat" });
  // @ts-expect-error: no such code
  if (new OrchestraError("x", "y").code === "seat_full") return;
}
