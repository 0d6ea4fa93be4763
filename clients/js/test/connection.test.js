// connect(), commands and views, against a live server.

import assert from "node:assert/strict";
import { test } from "node:test";

import { connect, createGame, getEvents, getView, OrchestraError } from "../orchestra.js";
import {
  collect,
  PERF,
  placementsOfEveryKind,
  RARE_STRINGS,
  RARE_WINDS,
  recordingWebSocket,
  servers,
  STRINGS,
  untilVersion,
  versions,
  WebSocket,
} from "./helpers.js";

test("connect as a player and as a spectator: role, seat, version and view", async () => {
  const url = servers.main;
  const created = await createGame(url, { players: ["Ada", "Ben"] });
  const ada = await connect(url, created.game_id, { token: created.seats[0].token, WebSocket });
  const ben = await connect(url, created.game_id, { token: created.seats[1].token, WebSocket });
  const watcher = await connect(url, created.game_id, { WebSocket });
  try {
    assert.deepEqual([ada.role, ada.seat, ben.role, ben.seat], ["player", 0, "player", 1]);
    assert.deepEqual([watcher.role, watcher.seat], ["spectator", null]);
    for (const connection of [ada, ben, watcher]) {
      assert.equal(connection.version, 1);
      assert.deepEqual(connection.view, await getView(url, created.game_id));
    }
    await assert.rejects(watcher.place({ token: PERF, space: "viola" }), { code: "forbidden" });
  } finally {
    await Promise.all([ada.close(), ben.close(), watcher.close()]);
  }
  assert.deepEqual(await ada.closed, { code: 1000, reason: "closed by the client", frame: null });
});

test("a private game: its watch token makes a spectator; no token is refused with 1008, not retried", async () => {
  const url = servers.main;
  const created = await createGame(url, { players: ["Ada"], private: true });
  const watcher = await connect(url, created.game_id, { token: created.watch_token, WebSocket });
  assert.equal(watcher.role, "spectator");
  await watcher.close();
  const { WebSocket: Recording, closes } = recordingWebSocket();
  await assert.rejects(connect(url, created.game_id, { WebSocket: Recording, waitForServer: true }), (error) => {
    assert.ok(error instanceof OrchestraError);
    assert.deepEqual([error.code, error.closeCode, error.frame.id], ["forbidden", 1008, null]);
    return true;
  });
  assert.deepEqual(closes, [1008], "a refused hello is final, even when waiting for the server");
  await assert.rejects(connect(url, "no-such-game", { WebSocket }), { code: "unknown_game", closeCode: 1008 });
});

test("place and endGame resolve to accepted, or reject with the wire code", async () => {
  const url = servers.main;
  const created = await createGame(url, { players: ["Ada", "Ben"] });
  const ada = await connect(url, created.game_id, { token: created.seats[0].token, WebSocket });
  const ben = await connect(url, created.game_id, { token: created.seats[1].token, WebSocket });
  try {
    const accepted = await ada.place({ token: PERF, space: "viola", id: "ada-1" });
    assert.deepEqual([accepted.type, accepted.id, accepted.version], ["accepted", "ada-1", 2]);
    assert.equal(accepted.events[0].event.type, "ChairClaimed");
    assert.deepEqual(await ada.place({ token: PERF, space: "viola", id: "ada-1" }), accepted, "an id is answered once");
    const made = await ben.place({ token: STRINGS, space: "cello" });
    assert.match(made.id, /^js-[a-z0-9]+-\d+$/);

    const refusals = [
      [ben.place({ token: { kind: "repair", family: "winds" }, space: "viola" }), "illegal_space"],
      [ben.place({ token: RARE_STRINGS, space: "rare_strings" }), "missing_choice"],
      [ben.place({ token: PERF, space: "viola", expected_version: 1 }), "stale_version"],
      [ben.place({ token: PERF, space: "nowhere" }), "bad_request"],
      [ben.endGame(), "forbidden"],
    ];
    for (const [promise, code] of refusals) {
      await assert.rejects(promise, (error) => {
        assert.ok(error instanceof OrchestraError);
        assert.equal(error.code, code);
        assert.equal(error.frame.type, "rejected");
        assert.equal(error.version, 3);
        return true;
      });
    }
    const ended = await ada.endGame({ expected_version: 3 });
    assert.equal(ended.events[0].event.type, "GameEnded");
    await assert.rejects(ben.place({ token: PERF, space: "oboe" }), { code: "game_over" });
  } finally {
    await Promise.all([ada.close(), ben.close()]);
  }
  await assert.rejects(ada.place({ token: PERF, space: "oboe" }), { code: "closed" });
});

// Every kind of event: claims, a steal by majority and by an instrument (doubled), below the line for
// each reason, rare chairs with materials, the end.
function script(seats) {
  const [ada, ben, cy] = seats;
  return [
    ...placementsOfEveryKind(seats),
    [ben, { token: RARE_WINDS, space: "rare_winds" }],
    [cy, { token: { kind: "repair", family: "winds" }, space: "oboe" }],
    [cy, { token: { kind: "performance", era: "baroque" }, space: "oboe" }],
    [ada, "end"],
  ];
}

test("the view stays equal to GET /games/{id} after every event, with deltas and with whole views", async () => {
  const url = servers.main;
  const created = await createGame(url, { players: ["Ada", "Ben", "Cy"] });
  const options = (seat, extra = {}) => ({ token: created.seats[seat].token, WebSocket, ...extra });
  const seats = [
    await connect(url, created.game_id, options(0)),
    await connect(url, created.game_id, options(1, { view: "full" })),
    await connect(url, created.game_id, options(2, { view: "delta" })),
  ];
  const history = await connect(url, created.game_id, { WebSocket, since: 0 });
  const seen = collect(history); // at once: the history follows the welcome
  const watchers = [
    history,
    await connect(url, created.game_id, { WebSocket, view: "full" }),
    await connect(url, created.game_id, { WebSocket, view: false }),
  ];
  const all = [...seats, ...watchers];
  const frames = all.map(() => []);
  all.forEach((connection, index) => connection.on("events", (_, frame) => frames[index].push(frame)));
  const views = all.map(() => 0);
  all.forEach((connection, index) => connection.on("view", () => (views[index] += 1)));
  const types = new Set();
  try {
    for (const [player, placement] of script(seats)) {
      const accepted = placement === "end" ? await player.endGame() : await player.place(placement);
      // Resolved once its envelopes were delivered: the player's view already holds them.
      assert.deepEqual([player.version, player.view.version], [accepted.version, accepted.version]);
      types.add(accepted.events[0].event.type);
      const expected = await getView(url, created.game_id);
      assert.equal(expected.version, accepted.version);
      for (const connection of all.slice(0, 5)) {
        await untilVersion(connection, accepted.version);
        assert.deepEqual(connection.view, expected, `${connection.role} ${connection.seat} at ${accepted.version}`);
      }
      await untilVersion(watchers[2], accepted.version);
      assert.equal(watchers[2].view.version, 1, "with view: false, the view stays the welcome's");
    }
    assert.deepEqual([...types].sort(), ["ChairClaimed", "ChairStolen", "GameEnded", "PlacedBelowLine"]);
    assert.ok(frames[0].every((frame) => frame.view_delta && !frame.view), "deltas by default");
    assert.ok(frames[1].every((frame) => frame.view && !frame.view_delta), "whole views when asked");
    assert.ok(frames[5].every((frame) => !frame.view && !frame.view_delta), "no view when asked");
    assert.deepEqual(views, [12, 12, 12, 12, 12, 0]);
    assert.deepEqual(
      seen.map((envelope) => envelope.version),
      versions(13),
      "since: 0: the whole history, then live, each once",
    );
    assert.deepEqual(seen, await getEvents(url, created.game_id));
    assert.ok(watchers[0].view.ended);
  } finally {
    await Promise.all(all.map((connection) => connection.close()));
  }
});

test("a resume point past the game's version is answered by a rejection without a command", async () => {
  const created = await createGame(servers.main, { players: ["Ada"] });
  const watcher = await connect(servers.main, created.game_id, { since: 50, WebSocket });
  const rejected = await new Promise((resolve) => watcher.on("rejected", resolve));
  assert.deepEqual([rejected.id, rejected.code], [null, "bad_request"]);
  assert.equal(watcher.version, 1);
  await watcher.close();
});
