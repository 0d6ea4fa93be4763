// The live board of the watch, play and host pages: the game's history and then its live events, over the
// client library's connection, which keeps the view current and resumes by itself. When the game's next
// game starts (a `next_game` frame), the page follows it.

import { connect, HISTORY_CHANGED } from "/client/orchestra.js";
import { $, Board, flash, gameId, origin, secret, showError, showWatching, status } from "./render.js";

/** The close codes of a seat's connection that its host ended (protocol.md, close codes): its token
 * replaced by a new one, or the seat closed. Coming back with the same token cannot help. */
export const TOKEN_REISSUED = 4003;
export const SEAT_CLOSED = 4004;
const HOST_CLOSES = {
  [TOKEN_REISSUED]: ["link replaced", "The host gave this seat a new link: this page no longer plays it. Open the new link the host sends you."],
  [SEAT_CLOSED]: ["seat closed", "The host closed this seat: it takes no part in this game."],
};

function ended(info) {
  if (HOST_CLOSES[info.code]) {
    const [badge, words] = HOST_CLOSES[info.code];
    status("refused", badge);
    showError(words);
  } else if (info.code === 1008) {
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

/** Where a page goes when the next game starts: a seat to its seat there (its token from the frame), a
 * spectator to its watch page (a private game's with the watch token the frame brings). */
export function nextGamePath(frame, page = "play") {
  const path = `/games/${encodeURIComponent(frame.game_id)}`;
  if (frame.token && page === "play") return `${path}/play#token=${encodeURIComponent(frame.token)}`;
  if (frame.token) return `${path}/watch#token=${encodeURIComponent(frame.token)}`;
  return `${path}/watch`;
}

/** Connect, draw the board once the history's GameCreated brings the layout, log every envelope once
 * (when the page has a log), and draw each new view. `extra`: `board(board)`, `welcome(frame,
 * connection)`, `seats(names)` (each seat's name, null while open, after each change), `next(frame)`
 * (the next game started; default: go to `nextGamePath(frame)`), `token` (default: the fragment's).
 * Resolves to the connection (null when the server refused it). */
export async function livePage(extra = {}) {
  let board = null;
  const log = $("log");
  let connection;
  let followed = false;
  const follow = (frame) => {
    if (followed || typeof frame?.game_id !== "string") return;
    followed = true;
    if (extra.next) extra.next(frame, connection);
    else location.assign(nextGamePath(frame, document.body.dataset.page));
  };
  try {
    // The whole history first (since 0): its GameCreated carries the layout. A page is patient: it waits
    // for a server that is restarting or busy (1012, 1013, a drop), with a random wait under a doubling
    // ceiling, for as long as it stays open; 1008 and 1011 are final.
    connection = await connect(origin, gameId, {
      token: extra.token === undefined ? secret : extra.token,
      since: 0,
      waitForServer: true,
      resumeFor: Infinity,
    });
  } catch (error) {
    ended({ code: error.closeCode, reason: error.frame?.message ?? error.message });
    return null;
  }
  connection.on("next_game", follow);
  // Each seat's name: GameCreated's players (null for an open seat), then each SeatTaken.
  const names = (connection.view.players ?? []).map((p) => p.name ?? null);
  const closedSeats = new Set();
  status("live", connection.view.ended ? "game over" : "live");
  extra.welcome?.(connection.welcome, connection);
  extra.seats?.(names, closedSeats);
  connection.on("events", (envelopes) => {
    let seatsChanged = false;
    for (const envelope of envelopes) {
      const event = envelope.event;
      if (event.type === "GameCreated") {
        event.players.forEach((name, seat) => {
          names[seat] = name ?? names[seat] ?? null;
        });
        for (const seat of event.closed ?? []) closedSeats.add(seat);
        seatsChanged = true;
      } else if (event.type === "SeatTaken") {
        names[event.seat] = event.name;
        seatsChanged = true;
      } else if (event.type === "SeatClosed") {
        closedSeats.add(event.seat);
        seatsChanged = true;
      }
      if (event.type === "GameCreated" && !board) {
        board = new Board($("board"), event.layout, [...names]);
        if (connection.presence) board.presence = connection.presence;
        extra.board?.(board);
        board.render(connection.view, false);
      }
      if (board && seatsChanged) board.players = names.map((name, seat) => name ?? `seat ${seat + 1} (open)`);
      if (!board || !log) continue;
      const line = board.logLine(envelope);
      log.prepend(line);
      if (envelope.version > connection.welcome.version) flash(line); // live, not the history
    }
    if (seatsChanged) {
      board?.render(connection.view, false, true);
      extra.seats?.(names, closedSeats);
    }
    if (log) log.dataset.version = String(connection.version);
    if (connection.view.ended) status("live", "game over");
  });
  connection.on("view", (view) => board?.render(view, true));
  // Who is at the table, on every node: a dot per seat in the scores, and the spectators' count.
  connection.on("presence", (presence) => {
    board?.showPresence(presence);
    showWatching(presence.spectators);
    extra.presence?.(presence);
  });
  connection.on("welcome", (frame) => {
    status("live", connection.view.ended ? "game over" : "live");
    extra.welcome?.(frame, connection);
  });
  connection.on("reconnecting", ({ code, reason }) => {
    // The host replaced this seat's token or closed the seat: coming back would only be refused.
    if (HOST_CLOSES[code]) {
      connection.close();
      ended({ code, reason });
      return;
    }
    // The store lost envelopes this page logged: the whole history follows again, so start the log anew.
    if (code === HISTORY_CHANGED && log) log.replaceChildren();
    status("reconnecting", "reconnecting\u2026");
  });
  connection.on("close", (info) => {
    if (info.code !== 1000) ended(info);
  });
  return connection;
}
