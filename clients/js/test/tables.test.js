// Tables (issue 40) from the JavaScript client against a live server: open seats and takeSeat, open
// tables and joinGame, the host's reissueToken and closeSeat (4003 and 4004 are final), playAgain and
// nextGame with the next_game frame.

import assert from "node:assert/strict";
import { test } from "node:test";

import {
  closeSeat,
  connect,
  createGame,
  FINAL_CLOSE_CODES,
  getView,
  joinGame,
  nextGame,
  OrchestraError,
  openTables,
  reissueToken,
} from "../orchestra.js";
import { PERF, servers, WebSocket } from "./helpers.js";

async function rejects(promise, code) {
  await assert.rejects(promise, (error) => error instanceof OrchestraError && error.code === code);
}

test("open seats: takeSeat names a seat once, placements wait for a full table, closeSeat ends the wait", async () => {
  const url = servers.main;
  const created = await createGame(url, { players: ["Ada", null, null] });
  assert.deepEqual(
    created.seats.map((seat) => seat.name),
    ["Ada", null, null],
  );
  assert.ok(created.host_token);
  const gameId = created.game_id;
  const ada = await connect(url, gameId, { token: created.seats[0].token, WebSocket });
  const ben = await connect(url, gameId, { token: created.seats[1].token, WebSocket });
  const cy = await connect(url, gameId, { token: created.seats[2].token, WebSocket, reconnect: false });
  await rejects(ada.place({ token: PERF, space: "viola" }), "table_not_full");
  await rejects(ada.takeSeat("Zed"), "seat_taken");
  await rejects(ben.takeSeat("ADA"), "bad_request");
  const taken = await ben.takeSeat("Ben");
  assert.deepEqual(taken.events[0].event, { type: "SeatTaken", seat: 1, name: "Ben" });
  await rejects(ben.takeSeat("Bob"), "seat_taken");
  assert.deepEqual(ben.view.players[1], { seat: 1, name: "Ben" });
  assert.deepEqual(await closeSeat(url, gameId, 2, created.host_token), { seat: 2, version: 3 });
  const info = await cy.closed;
  assert.equal(info.code, 4004);
  assert.ok(FINAL_CLOSE_CODES.includes(4004) && FINAL_CLOSE_CODES.includes(4003));
  await ada.place({ token: PERF, space: "viola" });
  await rejects(closeSeat(url, gameId, 1, created.host_token), "game_started");
  await rejects(closeSeat(url, gameId, 1, "not-the-host"), "forbidden");
  const view = await getView(url, gameId);
  assert.deepEqual(view.players[2], { seat: 2, name: null, closed: true });
  assert.deepEqual(ada.view.players, view.players);
  await Promise.all([ada.close(), ben.close()]);
});

test("an open table: openTables lists it, joinGame takes the lowest open seat, reissueToken ends a seat's link with 4003", async () => {
  const url = servers.main;
  const created = await createGame(url, { players: ["Ada", null], open: true });
  const gameId = created.game_id;
  const listed = (await openTables(url)).find((table) => table.game_id === gameId);
  assert.deepEqual(listed, { game_id: gameId, players: ["Ada", null], open_seats: [1], version: 1 });
  const joined = await joinGame(url, gameId, "Ben");
  assert.equal(joined.seat, 1);
  await rejects(joinGame(url, gameId, "Cy"), "no_open_seat");
  assert.equal((await openTables(url)).find((table) => table.game_id === gameId), undefined);
  const ben = await connect(url, gameId, { token: joined.token, WebSocket, reconnect: true });
  assert.equal(ben.seat, 1);
  const fresh = await reissueToken(url, gameId, 1, created.host_token);
  const info = await ben.closed; // final: not resumed, though reconnect is on
  assert.equal(info.code, 4003);
  assert.match(info.reason, /new token/);
  const again = await connect(url, gameId, { token: fresh, WebSocket });
  assert.equal(again.seat, 1);
  await again.close();
});

test("playAgain and nextGame start one next game; every connection gets next_game with its token", async () => {
  const url = servers.main;
  const created = await createGame(url, { players: ["Ada", "Ben"] });
  const gameId = created.game_id;
  const ada = await connect(url, gameId, { token: created.seats[0].token, WebSocket });
  const watcher = await connect(url, gameId, { WebSocket });
  await rejects(ada.playAgain(), "game_not_over");
  await ada.endGame();
  const told = new Promise((resolve) => watcher.on("next_game", resolve));
  const accepted = await ada.playAgain();
  const nextId = accepted.events[0].event.game_id;
  assert.equal(accepted.events[0].event.type, "NextGame");
  assert.deepEqual(await told, { game_id: nextId });
  while (!ada.nextGame) await new Promise((resolve) => setTimeout(resolve, 20));
  assert.deepEqual(ada.nextGame, { game_id: nextId, token: created.seats[0].token });
  assert.equal(await nextGame(url, gameId, created.host_token), nextId);
  const next = await connect(url, nextId, { token: ada.nextGame.token, WebSocket });
  assert.equal(next.seat, 0);
  assert.deepEqual(
    next.view.players.map((player) => player.name),
    ["Ada", "Ben"],
  );
  await Promise.all([ada.close(), watcher.close(), next.close()]);
});
