// A program that installed the orchestra-game-client package by name (tests/js/test_package.py): it creates a
// game on the server given as its argument, connects a seat and a spectator, places a legal token and an
// illegal one, and prints what it saw as one JSON line for the test to check.

import { connect, createGame, OrchestraError } from "orchestra-game-client";
import { WebSocket as NodeWebSocket } from "ws";

// Node 22 and browsers have a global WebSocket; Node 20 takes the ws package's.
const WebSocket = globalThis.WebSocket ?? NodeWebSocket;
const url = process.argv[2];

const game = await createGame(url, { players: ["Ada", "Ben"] });
const ada = await connect(url, game.game_id, { token: game.seats[0].token, WebSocket });
const watcher = await connect(url, game.game_id, { WebSocket });
const adaSaw = [];
const watcherSaw = [];
ada.on("events", (envelopes) => adaSaw.push(...envelopes));
const watched = new Promise((resolve) => {
  watcher.on("events", (envelopes) => {
    watcherSaw.push(...envelopes);
    resolve();
  });
});

const accepted = await ada.place({ token: { kind: "performance", era: "classical" }, space: "viola" });
await watched;
let refused = null;
try {
  await ada.place({ token: { kind: "repair", family: "winds" }, space: "viola" });
} catch (error) {
  refused = error instanceof OrchestraError ? error.code : `not an OrchestraError: ${error}`;
}

// Only the package's root and its package.json are exported: a deep import is refused.
let deepImport = "resolved";
try {
  await import("orchestra-game-client/orchestra.js");
} catch (error) {
  deepImport = error.code;
}
const { default: manifest } = await import("orchestra-game-client/package.json", { with: { type: "json" } });

console.log(
  JSON.stringify({
    game_id: game.game_id,
    role: ada.role,
    seat: ada.seat,
    accepted,
    ada_saw: adaSaw,
    watcher_saw: watcherSaw,
    viola: ada.view.spaces.viola,
    refused,
    deep_import: deepImport,
    version: manifest.version,
  }),
);
await Promise.all([ada.close(), watcher.close()]);
