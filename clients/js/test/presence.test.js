// Presence: who is at the table, from the presence frames and GET /games/{id}, against a live server.

import assert from "node:assert/strict";
import { test } from "node:test";

import { connect, createGame, getPresence, getView } from "../orchestra.js";
import { servers, WebSocket } from "./helpers.js";

function presence(online, spectators) {
  return { seats: online.map((up, seat) => ({ seat, online: up })), spectators };
}

/** Resolves with `connection.presence` once `check` holds for it (at once if it does already). */
function presenceWhere(connection, check, timeout = 10000) {
  return new Promise((resolve, reject) => {
    if (connection.presence && check(connection.presence)) {
      resolve(connection.presence);
      return;
    }
    const timer = setTimeout(() => {
      off();
      reject(new Error(`presence never matched; last: ${JSON.stringify(connection.presence)}`));
    }, timeout);
    const off = connection.on("presence", (now) => {
      if (!check(now)) return;
      clearTimeout(timer);
      off();
      resolve(now);
    });
  });
}

test("presence: a player and a spectator see each other, as getPresence does, and getView stays the view", async () => {
  const url = servers.main;
  const created = await createGame(url, { players: ["Ada", "Ben"] });
  const ada = await connect(url, created.game_id, { token: created.seats[0].token, WebSocket });
  const seen = [];
  ada.on("presence", (now) => seen.push(now));
  const watcher = await connect(url, created.game_id, { WebSocket });
  try {
    const both = presence([true, false], 1);
    assert.deepEqual(await presenceWhere(watcher, (now) => now.spectators === 1), both);
    assert.deepEqual(await presenceWhere(ada, (now) => now.spectators === 1), both);
    assert.deepEqual(seen.at(-1), both, "each frame reaches the listener");
    assert.deepEqual(await getPresence(url, created.game_id), both);
    const view = await getView(url, created.game_id);
    assert.equal("presence" in view, false);
    assert.deepEqual(ada.view, view);
    await watcher.close();
    assert.deepEqual(await presenceWhere(ada, (now) => now.spectators === 0), presence([true, false], 0));
  } finally {
    await Promise.all([ada.close(), watcher.close()]);
  }
});
