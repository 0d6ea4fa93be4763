// The wall: the public games being played and the most recently ended ones, each as a small board, its
// players and scores, kept current by the client library from one websocket (the wall feed). The feed
// sends a first page, the most active games; more come a page at a time as the reader scrolls to the end
// (or presses "Show more games").

import { connectWall } from "/client/orchestra.js";
import { $, el, MiniBoard, origin, seatDot, showError, status } from "./render.js";

const tiles = new Map(); // game id -> {node, board, state, watching, version, players}

// A tile that changed shows it for a moment (its version fades in). Switching between two animations
// restarts it without forcing a layout (a wall of busy games changes many tiles a second).
function pulse(node) {
  const next = node.classList.contains("pulse-a") ? "pulse-b" : "pulse-a";
  node.classList.remove("pulse-a", "pulse-b");
  node.classList.add(next);
}

function watchLink(gameId) {
  return `/games/${encodeURIComponent(gameId)}/watch`;
}

function makeTile(game) {
  const node = el("article", "tile");
  node.dataset.game = game.game_id;
  const head = el("header", "tile-head");
  const link = el("a", "tile-link", game.game_id);
  link.href = watchLink(game.game_id);
  const state = el("span", "tile-state");
  const watching = el("span", "tile-watching");
  const version = el("span", "tile-version");
  head.append(link, state, watching, version);
  const root = el("div", "board mini");
  root.setAttribute("aria-label", `the Orchestra of game ${game.game_id}`);
  const players = el("ul", "tile-players");
  game.players.forEach((name, seat) => {
    const item = el("li", `seat-${seat % 4}`);
    item.dataset.seat = String(seat);
    item.append(seatDot(seat), el("span", "name", seatName(name)), el("span", "prestige"));
    players.append(item);
  });
  node.append(head, root, players);
  // The whole tile links to the game's watch page; the board's chips are not links of their own.
  node.addEventListener("click", (event) => {
    if (!event.target.closest("a")) location.href = watchLink(game.game_id);
  });
  const tile = { node, board: new MiniBoard(root, game.layout, game.players), state, watching, version, players };
  tiles.set(game.game_id, tile);
  return tile;
}

// A seat still open (its player names themselves when they sit down) says so instead of a name.
function seatName(name) {
  return name ?? "open seat";
}

function show(game, animate) {
  const tile = tiles.get(game.game_id) ?? makeTile(game);
  tile.board.showChairs(game.chairs, false);
  tile.node.dataset.version = String(game.version);
  tile.node.dataset.ended = String(game.ended);
  tile.version.textContent = `v${game.version}`;
  tile.state.textContent = game.ended ? "ended" : "live";
  tile.state.dataset.state = game.ended ? "ended" : "live";
  for (const item of tile.players.children) {
    const seat = Number(item.dataset.seat);
    const name = item.querySelector(".name");
    const named = seatName(game.players[seat]);
    if (name.textContent !== named) name.textContent = named;
    const prestige = String(game.prestige[seat] ?? 0);
    const shown = item.querySelector(".prestige");
    if (shown.textContent !== prestige) shown.textContent = prestige;
    const online = game.presence?.seats.find((s) => s.seat === seat)?.online;
    const dot = item.querySelector(".presence");
    if (dot.dataset.online !== String(Boolean(online))) dot.replaceWith(seatDot(seat, online));
  }
  const spectators = game.presence?.spectators ?? 0;
  tile.watching.textContent = spectators ? `${spectators} watching` : "";
  tile.node.dataset.spectators = String(spectators);
  if (animate) pulse(tile.node);
}

// Put `nodes` in `section` in this order, moving only those out of place (a new game moves no other tile).
function place(section, nodes) {
  let current = section.firstElementChild;
  for (const node of nodes) {
    if (node === current) current = current.nextElementSibling;
    else section.insertBefore(node, current);
  }
  while (current) {
    const next = current.nextElementSibling;
    current.remove();
    current = next;
  }
}

// The tiles in the wall's order: live games newest first, then the ended ones, most recently ended first.
function arrange(games) {
  const live = [];
  const ended = [];
  for (const game of games.values()) (game.ended ? ended : live).push(tiles.get(game.game_id).node);
  place($("live"), live);
  place($("ended"), ended);
  $("ended-head").hidden = ended.length === 0;
  $("empty").hidden = games.size > 0;
  counted = `${live.length} live, ${ended.length} ended`;
  $("count").textContent = counted;
  document.body.dataset.games = String(games.size);
}

// The "more" line: shown while the wall holds games this page does not; a page asked for at a time.
let counted = "";
let asking = false;
let wall = null;

function showMore() {
  const more = wall !== null && wall.total > wall.games.size;
  $("more-line").hidden = !more;
  document.body.dataset.total = String(wall?.total ?? 0);
  $("count").textContent = more ? `${counted}, of ${wall.total}` : counted;
}

function moreInView() {
  const line = $("more-line");
  return !line.hidden && line.getBoundingClientRect().top < window.innerHeight;
}

function askMore() {
  if (asking || wall === null || wall.total <= wall.games.size) return;
  asking = wall.more();
}

// The reader is at the end of the tiles (or the screen is not full): the next page.
function fill() {
  if (moreInView()) askMore();
}

function redraw(games) {
  for (const id of [...tiles.keys()]) if (!games.has(id)) tiles.delete(id);
  for (const game of games.values()) show(game, false);
  arrange(games);
}

async function main() {
  let connection;
  try {
    // Patient, as the game pages are: it waits for a server restarting or busy for as long as it is open.
    connection = await connectWall(origin, { waitForServer: true, resumeFor: Infinity });
  } catch (error) {
    status("closed", "closed");
    showError(`The wall cannot be shown: ${error.message}`);
    return;
  }
  wall = connection;
  redraw(connection.games);
  showMore();
  status("live", "live");
  connection.on("wall", (games) => {
    status("live", "live");
    asking = false;
    redraw(games);
    showMore();
  });
  connection.on("page", (games) => {
    asking = false;
    for (const game of games) show(game, false);
    arrange(connection.games);
    showMore();
    fill();
  });
  $("more").addEventListener("click", askMore);
  window.addEventListener("scroll", fill, { passive: true });
  window.addEventListener("resize", fill);
  fill();
  connection.on("changes", ({ added, changed, retired }) => {
    for (const id of retired) tiles.delete(id);
    for (const game of added) show(game, false);
    let moved = added.length > 0 || retired.length > 0;
    for (const change of changed) {
      const game = connection.games.get(change.game_id);
      if (game) show(game, true);
      if (change.ended !== undefined) moved = true;
    }
    if (moved) arrange(connection.games); // the tiles move only when the wall's order changed
    showMore();
  });
  connection.on("reconnecting", () => status("reconnecting", "reconnecting\u2026"));
  connection.on("close", () => status("closed", "closed"));
  document.body.dataset.ready = "true";
}

main();
