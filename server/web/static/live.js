// The live board of the watch and play pages: the game's history and then its live events, over the
// client library's connection, which keeps the view current and resumes by itself.

import { connect, HISTORY_CHANGED } from "/client/orchestra.js";
import { $, Board, flash, gameId, origin, secret, showError, showWatching, status } from "./render.js";

function ended(info) {
  if (info.code === 1008) {
    status("refused", "refused");
    showError(`The server refused this page: ${info.reason || "not allowed"}`);
  } else if (info.code === 1011) {
    // damaged_game: the stored history cannot be read; reconnecting cannot help until it is restored.
    status("damaged", "damaged");
    showError(`This game cannot be shown: ${info.reason || "its stored history is damaged"}`);
  } else {
    status("closed", "closed");
  }
}

/** Connect, draw the board once the history's GameCreated brings the layout, log every envelope once
 * (when the page has a log), and draw each new view. `extra`: `board(board)`, `welcome(frame, connection)`. Resolves to the
 * connection (null when the server refused it). */
export async function livePage(extra = {}) {
  let board = null;
  const log = $("log");
  let connection;
  try {
    // The whole history first (since 0): its GameCreated carries the layout. A page is patient: it waits
    // for a server that is restarting or busy (1012, 1013, a drop), with a random wait under a doubling
    // ceiling, for as long as it stays open; 1008 and 1011 are final.
    connection = await connect(origin, gameId, { token: secret, since: 0, waitForServer: true, resumeFor: Infinity });
  } catch (error) {
    ended({ code: error.closeCode, reason: error.frame?.message ?? error.message });
    return null;
  }
  status("live", connection.view.ended ? "game over" : "live");
  extra.welcome?.(connection.welcome, connection);
  connection.on("events", (envelopes) => {
    for (const envelope of envelopes) {
      if (envelope.event.type === "GameCreated" && !board) {
        board = new Board($("board"), envelope.event.layout, envelope.event.players);
        if (connection.presence) board.presence = connection.presence;
        extra.board?.(board);
        board.render(connection.view, false);
      }
      if (!board || !log) continue;
      const line = board.logLine(envelope);
      log.prepend(line);
      if (envelope.version > connection.welcome.version) flash(line); // live, not the history
    }
    if (log) log.dataset.version = String(connection.version);
    if (connection.view.ended) status("live", "game over");
  });
  connection.on("view", (view) => board?.render(view, true));
  // Who is at the table, on every node: a dot per seat in the scores, and the spectators' count.
  connection.on("presence", (presence) => {
    board?.showPresence(presence);
    showWatching(presence.spectators);
  });
  connection.on("welcome", (frame) => {
    status("live", connection.view.ended ? "game over" : "live");
    extra.welcome?.(frame, connection);
  });
  connection.on("reconnecting", ({ code }) => {
    // The store lost envelopes this page logged: the whole history follows again, so start the log anew.
    if (code === HISTORY_CHANGED && log) log.replaceChildren();
    status("reconnecting", "reconnecting\u2026");
  });
  connection.on("close", ended);
  return connection;
}
