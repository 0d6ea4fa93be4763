// Resuming: after a dropped connection, a server restart (1012) and a full game (1013), with no envelope
// missed or repeated; after the store lost envelopes (4001), from version 0; 1008 and 1011 are final.

import assert from "node:assert/strict";
import { test } from "node:test";

import { connect, createGame, getEvents, getView, HISTORY_CHANGED } from "../orchestra.js";
import {
  collect,
  control,
  PERF,
  recordingWebSocket,
  servers,
  sleep,
  startProxy,
  STRINGS,
  until,
  untilVersion,
  versions,
  WebSocket,
} from "./helpers.js";

const PLACES = ["lute", "violin_bc", "viola", "violin_cr", "cello"];

async function checkCaughtUp(url, gameId, connection, seen) {
  const events = await getEvents(url, gameId);
  const last = events[events.length - 1].version;
  await untilVersion(connection, last);
  assert.deepEqual(
    seen.map((envelope) => envelope.version),
    versions(last, seen[0]?.version ?? 1),
    "every envelope once, in order",
  );
  assert.deepEqual(seen, events.slice(seen[0].version - 1), "the envelopes the server holds");
  assert.deepEqual(connection.view, await getView(url, gameId));
}

const WINDS = { kind: "repair", family: "winds" };

test("a dropped connection resumes with since: nothing missed or repeated, unanswered commands answered once", async () => {
  const url = servers.main;
  const created = await createGame(url, { players: ["Ada", "Ben"] });
  const proxy = await startProxy(url);
  const ada = await connect(proxy.url, created.game_id, { token: created.seats[0].token, since: 0, WebSocket });
  const adaSeen = collect(ada);
  const watcher = await connect(proxy.url, created.game_id, { since: 0, view: "full", WebSocket });
  const watcherSeen = collect(watcher);
  const ben = await connect(url, created.game_id, { token: created.seats[1].token, WebSocket });
  const reconnecting = [];
  ada.on("reconnecting", (info) => reconnecting.push(info));
  try {
    await ada.place({ token: PERF, space: "viola" });
    // A command in flight when the network goes: sent again after the resume, with its id.
    const inFlight = ada.place({ token: STRINGS, space: "cello" });
    proxy.refuse = true;
    proxy.drop();
    await until(() => reconnecting.length === 1, "the drop");
    assert.equal(reconnecting[0].code, 1006);
    // Meanwhile the game moves on, and Ada asks for more before she is back.
    for (const space of PLACES) await ben.place({ token: { kind: "repair", family: "strings" }, space });
    const whileAway = ada.place({ token: PERF, space: "clarinet" });
    await sleep(300);
    proxy.refuse = false;
    const [first, second] = await Promise.all([inFlight, whileAway]);
    // Before the drop (3) or sent again after it (8); and the one asked for while away goes last.
    assert.ok([3, 8].includes(first.version), `in flight: ${first.version}`);
    assert.equal(second.version, 9);
    await checkCaughtUp(url, created.game_id, ada, adaSeen);
    await checkCaughtUp(url, created.game_id, watcher, watcherSeen);
    const ids = (await getEvents(url, created.game_id)).map((envelope) => envelope.command_id);
    assert.equal(new Set(ids).size, ids.length, "each command written once");
    assert.equal(ada.reconnects, 1);
    assert.ok(watcher.reconnects >= 1);
    // And it goes on live from there.
    const more = await ben.place({ token: PERF, space: "timpani" });
    await untilVersion(ada, more.version);
    assert.deepEqual(ada.view, await getView(url, created.game_id));
  } finally {
    await Promise.all([ada.close(), watcher.close(), ben.close()]);
    await proxy.close();
  }
});

test("a server restart (1012) is resumed from where each client was", async () => {
  const url = servers.restartable;
  const created = await createGame(url, { players: ["Ada", "Ben"] });
  const { WebSocket: Recording, closes } = recordingWebSocket();
  const ada = await connect(url, created.game_id, { token: created.seats[0].token, since: 0, WebSocket: Recording });
  const watcher = await connect(url, created.game_id, { view: "full", WebSocket: Recording });
  const adaSeen = collect(ada);
  const watcherSeen = collect(watcher);
  try {
    await ada.place({ token: PERF, space: "viola" });
    await untilVersion(watcher, 2);
    await control("restart");
    assert.ok(closes.includes(1012), `closed with ${closes}`);
    const ben = await connect(url, created.game_id, { token: created.seats[1].token, WebSocket });
    for (const space of PLACES) await ben.place({ token: STRINGS, space });
    await ben.close();
    const mine = await ada.place({ token: PERF, space: "clarinet" });
    assert.equal(mine.version, 8);
    await checkCaughtUp(url, created.game_id, ada, adaSeen);
    await checkCaughtUp(url, created.game_id, watcher, watcherSeen);
    assert.equal(watcherSeen[0].version, 2);
  } finally {
    await Promise.all([ada.close(), watcher.close()]);
  }
});

test("1013 (a game full of connections) is retried until there is room", async () => {
  const url = servers.small; // 2 connections a game
  const created = await createGame(url, { players: ["Ada", "Ben"] });
  const proxy = await startProxy(url);
  const { WebSocket: Recording, closes } = recordingWebSocket();
  const ada = await connect(proxy.url, created.game_id, { token: created.seats[0].token, since: 0, WebSocket: Recording });
  const adaSeen = collect(ada);
  const watcher = await connect(url, created.game_id, { WebSocket });
  await assert.rejects(connect(url, created.game_id, { WebSocket }), { code: "unavailable", closeCode: 1013 });
  let ben = null;
  try {
    await ada.place({ token: PERF, space: "viola" });
    proxy.refuse = true;
    proxy.drop();
    // Ben waits for room (a first connection retried as a resume is), and takes Ada's.
    ben = await connect(url, created.game_id, { token: created.seats[1].token, WebSocket, waitForServer: true });
    proxy.refuse = false;
    await until(() => closes.includes(1013), "Ada's resume refused with 1013");
    for (const space of PLACES) await ben.place({ token: STRINGS, space });
    await ben.close();
    await checkCaughtUp(url, created.game_id, ada, adaSeen);
    assert.equal(ada.reconnects, 1);
    assert.deepEqual(await ada.place({ token: PERF, space: "clarinet" }).then((a) => a.version), 8);
  } finally {
    await Promise.all([ada.close(), watcher.close(), ben?.close()]);
    await proxy.close();
  }
});

test("1011 (the game's history damaged) is final: no retry, unanswered commands rejected", async () => {
  const url = servers.main;
  const created = await createGame(url, { players: ["Ada"] });
  const proxy = await startProxy(url);
  const { WebSocket: Recording, closes } = recordingWebSocket();
  const ada = await connect(proxy.url, created.game_id, { token: created.seats[0].token, WebSocket: Recording });
  const endings = [];
  ada.on("close", (info) => endings.push(info));
  await ada.place({ token: PERF, space: "viola" });
  await control("damage", { game: created.game_id, version: 3 });
  proxy.drop();
  const info = await ada.closed;
  assert.equal(info.code, 1011);
  assert.equal(info.frame.code, "damaged_game");
  assert.match(info.reason, /version 3/);
  assert.deepEqual(endings, [info]);
  await assert.rejects(ada.place({ token: PERF, space: "clarinet" }), { code: "closed" });
  const attempts = proxy.connections;
  await sleep(1000);
  assert.equal(proxy.connections, attempts, "no hello after 1011");
  assert.equal(closes.filter((code) => code === 1011).length, 1);
  await proxy.close();
});

test("4001 (the store lost envelopes) resumes from 0: the history again as the stream holds it", async () => {
  // Two nodes on one Redis: `main` holds the connections, `restartable` writes after the loss.
  const url = servers.main;
  const created = await createGame(url, { players: ["Ada", "Ben", "Cy"] });
  const [ada, ben] = await Promise.all(
    [0, 1].map((seat) => connect(url, created.game_id, { token: created.seats[seat].token, WebSocket })),
  );
  const watcher = await connect(url, created.game_id, { since: 0, WebSocket });
  const seen = collect(watcher);
  const codes = [];
  watcher.on("reconnecting", ({ code }) => {
    codes.push(code);
    if (code === HISTORY_CHANGED) seen.length = 0; // what a log does: the whole history follows again
  });
  try {
    assert.equal((await ada.place({ token: WINDS, space: "oboe" })).version, 2);
    const lost = await ben.place({ token: WINDS, space: "oboe" });
    assert.equal(lost.version, 3);
    await untilVersion(watcher, 3);
    await control("lose", { game: created.game_id, version: 2, key: `1:${lost.id}` });
    const cy = await connect(servers.restartable, created.game_id, {
      token: created.seats[2].token,
      reconnect: false,
      WebSocket,
    });
    assert.equal(cy.version, 2);
    const baroque = { kind: "performance", era: "baroque" };
    assert.equal((await cy.place({ token: baroque, space: "violin_bc" })).version, 3);
    await cy.close();
    // Decided after the lost envelope: the node reads the game again and closes its connections with 4001;
    // the command goes out again after the resume and is accepted after the other node's version 3.
    assert.equal((await ada.place({ token: WINDS, space: "oboe" })).version, 4);
    await untilVersion(watcher, 4);
    const stream = await getEvents(url, created.game_id);
    assert.deepEqual(codes, [HISTORY_CHANGED]);
    assert.deepEqual(seen, stream);
    assert.equal(stream[2].seat, 2, "Cy's version 3, not Ben's lost one");
    for (const connection of [ada, ben, watcher]) {
      await untilVersion(connection, 4);
      assert.deepEqual(connection.view, await getView(url, created.game_id));
    }
  } finally {
    await Promise.all([ada, ben, watcher].map((connection) => connection.close()));
  }
});
