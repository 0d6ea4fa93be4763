// connectWall() and applyWallChanges(), against a live server.

import assert from "node:assert/strict";
import { test } from "node:test";
import { isDeepStrictEqual } from "node:util";

import { applyWallChanges, connect, connectWall, createGame, getView } from "../orchestra.js";
import { PERF, servers, startProxy, STRINGS, until, WebSocket } from "./helpers.js";

// What the wall must show of a game, from its view.
function wallOf(view) {
  const chairs = {};
  for (const [id, space] of Object.entries(view.spaces)) {
    if (space.kind === "rare") chairs[id] = space.chairs.map((seated) => seated.seat);
    else chairs[id] = space.chair ? [space.chair.seat] : [];
  }
  const prestige = view.players.map(() => 0);
  for (const score of view.scores) prestige[score.seat] = score.prestige;
  return { version: view.version, ended: view.ended, chairs, prestige };
}

function shown(game) {
  return game && { version: game.version, ended: game.ended, chairs: game.chairs, prestige: game.prestige };
}

// Resolves once the wall shows the game as GET /games/{id} does (fails showing both if it does not).
async function untilShown(wall, url, gameId) {
  const expected = wallOf(await getView(url, gameId));
  try {
    await until(() => isDeepStrictEqual(shown(wall.games.get(gameId)), expected), `${gameId} on the wall`, 5000);
  } catch {
    assert.deepEqual(shown(wall.games.get(gameId)), expected);
  }
}

test("applyWallChanges retires, adds first, changes only the named fields, and moves a game that ends", () => {
  const game = (id, ended = false) => ({ game_id: id, players: ["Ada"], version: 1, ended, chairs: { viola: [], oboe: [0] }, prestige: [3] });
  const held = new Map([["b", game("b")], ["a", game("a")], ["z", game("z", true)]]);
  const after = applyWallChanges(held, {
    type: "wall_changes",
    retired: ["z"],
    added: [game("c")],
    changed: [{ game_id: "a", version: 5, ended: true, chairs: { viola: [0] } }, { game_id: "gone", version: 9 }],
  });
  assert.deepEqual([...after.keys()], ["c", "b", "a"]);
  assert.deepEqual(after.get("a"), { ...game("a"), version: 5, ended: true, chairs: { viola: [0], oboe: [0] } });
  assert.deepEqual([...held.keys()], ["b", "a", "z"]); // the Map given is left as it was
});

test("connectWall keeps each game equal to GET /games/{id}, and after a drop starts from a new wall frame", async () => {
  // A wall with room for the test's game: every game the test address creates on `main` (the other
  // tests') would take its share of the wall there, and a first page of other games its place.
  const proxy = await startProxy(servers.wall);
  const url = servers.wall;
  const wall = await connectWall(proxy.url, { WebSocket });
  const older = new Set(wall.games.keys()); // what the wall held before (nothing, on a Redis of its own)
  const frames = [];
  wall.on("changes", (changes, frame) => frames.push(frame));
  let walls = 0;
  wall.on("wall", () => (walls += 1));
  try {
    const created = await createGame(url, { players: ["Ada", "Ben"] });
    const hidden = await createGame(url, { players: ["Cy"], private: true });
    const id = created.game_id;
    await untilShown(wall, url, id);
    const order = [...wall.games.keys()];
    assert.ok(order.every((other, index) => !older.has(other) || index > order.indexOf(id)), "a new game goes first");
    const ada = await connect(url, id, { token: created.seats[0].token, WebSocket });
    const ben = await connect(url, id, { token: created.seats[1].token, WebSocket });
    await ada.place({ token: PERF, space: "viola" });
    await untilShown(wall, url, id);
    await ben.place({ token: STRINGS, space: "viola" });
    await untilShown(wall, url, id);
    const change = frames.flatMap((frame) => frame.changed).find((c) => c.game_id === id && c.version === 3);
    const { presence: _presence, ...played } = change; // players connecting come and go at their own pace
    assert.deepEqual(played, { game_id: id, version: 3 }); // the chair stayed: only the version changed

    proxy.drop();
    await until(() => walls === 1, "a new wall frame after the drop");
    assert.equal(wall.reconnects, 1);
    await ben.place({ token: PERF, space: "viola" });
    await untilShown(wall, url, id);
    await ada.endGame();
    await untilShown(wall, url, id);
    assert.equal(wall.games.get(id).ended, true);
    assert.ok(!wall.games.has(hidden.game_id));
    await Promise.all([ada.close(), ben.close()]);
  } finally {
    const info = await wall.close();
    assert.equal(info.code, 1000);
    await proxy.close();
  }
});

test("connectWall holds a page of the wall and more() adds the next, a page at a time", async () => {
  const url = servers.small; // its wall's pages hold 2 games
  const ids = [];
  for (const name of ["Ada", "Ben", "Cy"]) ids.push((await createGame(url, { players: [name] })).game_id);
  const wall = await connectWall(url, { WebSocket });
  try {
    assert.equal(wall.games.size, 2);
    assert.ok(wall.total >= 3, `total ${wall.total}`);
    const pages = [];
    wall.on("page", (games, frame) => pages.push([games, frame]));
    while (!ids.every((id) => wall.games.has(id))) {
      const before = pages.length;
      assert.equal(wall.more(), true);
      await until(() => pages.length > before, "a wall_page");
      const [games, frame] = pages.at(-1);
      assert.equal(frame.type, "wall_page");
      assert.ok(frame.games.length <= 2 && games.length <= frame.games.length);
      assert.equal(wall.total, frame.total);
      assert.ok(pages.length <= wall.total, "each page brings games until every one is held");
    }
  } finally {
    await wall.close();
  }
});
