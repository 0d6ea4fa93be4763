// The list of games: "New game" (named and open seats, the layout, who may watch, an open table, the API
// key when the server needs one), the open tables with a Join button, and the public games, live and
// ended, refreshed every few seconds.

import { createGame, joinGame, listGames, openTables } from "/client/orchestra.js";
import { keepHosted, storeApiKey, storedApiKey } from "./keep.js";
import { refusalWords } from "./refusals.js";
import { $, el, origin, seatDot, showError } from "./render.js";

const body = $("games").querySelector("tbody");

// New game ---------------------------------------------------------------------------------------------

function seatInputs() {
  const count = Number($("seat-count").value);
  const holder = $("seat-names");
  while (holder.children.length < count) {
    const seat = holder.children.length;
    const row = el("div", "row");
    const label = el("label", `seat-${seat % 4}`, `Seat ${seat + 1}`);
    label.htmlFor = `seat-${seat}`;
    const input = el("input");
    input.id = `seat-${seat}`;
    input.maxLength = 32;
    input.placeholder = "open seat";
    input.autocomplete = "off";
    row.append(label, input);
    holder.append(row);
  }
  while (holder.children.length > count) holder.lastElementChild.remove();
}

function needApiKey() {
  $("api-key-row").hidden = false;
  $("api-key-hint").hidden = false;
  $("api-key").value = storedApiKey();
}

// What the form needs of the server, written into the page by the server: its layouts, and whether
// creating a game needs its API key.
function settings() {
  const layouts = (document.body.dataset.layouts || "standard").split(" ");
  $("layout").replaceChildren(...layouts.map((name) => new Option(name, name, name === "standard", name === "standard")));
  if (document.body.dataset.apiKey === "true") needApiKey();
}

async function create(event) {
  event.preventDefault();
  const said = $("new-game-message");
  said.textContent = "";
  delete said.dataset.code;
  const players = [...$("seat-names").querySelectorAll("input")].map((input) => input.value.trim() || null);
  const apiKey = $("api-key-row").hidden ? "" : $("api-key").value.trim();
  const request = {
    players,
    layout: $("layout").value,
    private: document.querySelector('input[name="spectators"]:checked').value === "token",
    open: $("open-table").checked,
    apiKey: apiKey || undefined,
  };
  $("create").disabled = true;
  try {
    const created = await createGame(origin, request);
    if (apiKey) storeApiKey(apiKey);
    const seats = {};
    for (const seat of created.seats) seats[seat.seat] = seat.token;
    keepHosted(created.game_id, { seats, watch_token: created.watch_token ?? null });
    const hostToken = created.host_token ?? "";
    location.assign(`/games/${encodeURIComponent(created.game_id)}/host#token=${encodeURIComponent(hostToken)}`);
  } catch (error) {
    $("create").disabled = false;
    if (error.status === 401) {
      needApiKey();
      said.textContent = apiKey
        ? "The server refused this API key: check it and try again."
        : "This server needs its API key to create a game: enter it above, then create again.";
      said.dataset.code = "forbidden";
      return;
    }
    said.textContent = refusalWords(error);
    said.dataset.code = error.code;
  }
}

// Open tables ------------------------------------------------------------------------------------------

function openTable(game) {
  const item = el("li", "open-table");
  item.dataset.game = game.game_id;
  const who = el("div", "table-who");
  const seated = game.players.filter((name) => name !== null);
  const free = game.open_seats.length;
  who.append(el("span", "table-id", game.game_id), document.createTextNode(" \u00b7 "));
  who.append(document.createTextNode(seated.length ? `${seated.join(", ")} \u00b7 ` : ""));
  who.append(el("span", "free", free === 1 ? "1 seat free" : `${free} seats free`));
  const form = el("form", "join");
  const label = el("label", "", "Your name");
  const input = el("input");
  input.maxLength = 32;
  input.required = true;
  input.autocomplete = "nickname";
  input.id = `join-${game.game_id}`;
  label.htmlFor = input.id;
  const button = el("button", "primary", "Join");
  button.type = "submit";
  form.append(label, input, button);
  form.addEventListener("submit", (event) => join(event, game.game_id, input, button));
  item.append(who, form);
  return item;
}

async function join(event, gameId, input, button) {
  event.preventDefault();
  const said = $("join-message");
  said.textContent = "";
  delete said.dataset.code;
  button.disabled = true;
  try {
    const seat = await joinGame(origin, gameId, input.value);
    location.assign(`/games/${encodeURIComponent(gameId)}/play#token=${encodeURIComponent(seat.token)}`);
  } catch (error) {
    button.disabled = false;
    said.textContent = refusalWords(error);
    said.dataset.code = error.code;
  }
}

function showOpenTables(open) {
  const list = $("open-tables");
  // A table still listed keeps its row, so a name being typed is not lost on a refresh.
  const keep = new Map([...list.children].map((item) => [item.dataset.game, item]));
  list.replaceChildren(...open.map((game) => {
    const held = keep.get(game.game_id);
    if (!held) return openTable(game);
    const fresh = openTable(game);
    held.querySelector(".table-who").replaceWith(fresh.querySelector(".table-who"));
    return held;
  }));
  $("no-open").hidden = open.length > 0;
}

// Games ------------------------------------------------------------------------------------------------

async function refresh() {
  let games;
  let open;
  try {
    [games, open] = await Promise.all([listGames(origin), openTables(origin)]);
    showError("");
  } catch (error) {
    showError(`Cannot list the games: ${refusalWords(error)}`);
    return;
  }
  showOpenTables(open);
  const rows = games.map((game) => {
    const row = el("tr");
    row.dataset.game = game.game_id;
    const id = el("td", "id");
    const link = el("a", "", game.game_id);
    link.href = `/games/${encodeURIComponent(game.game_id)}/watch`;
    id.append(link);
    row.append(id);
    const players = el("td", "players");
    game.players.forEach((name, seat) => {
      if (seat) players.append(document.createTextNode(", "));
      players.append(seatDot(seat, game.presence?.seats[seat]?.online));
      players.append(el("span", `name seat-${seat % 4}`, name ?? "open seat"));
    });
    const watching = game.presence?.spectators ?? 0;
    if (watching) players.append(el("span", "watching", ` \u00b7 ${watching} watching`));
    row.append(players);
    row.append(el("td", "version", String(game.version)));
    row.append(el("td", game.ended ? "ended" : "live", game.ended ? "ended" : "live"));
    const links = el("td", "links");
    const watch = el("a", "", game.ended ? "view" : "watch");
    watch.href = `/games/${encodeURIComponent(game.game_id)}/watch`;
    const replay = el("a", "", "replay");
    replay.href = `/games/${encodeURIComponent(game.game_id)}/replay`;
    links.append(watch, document.createTextNode(" \u00b7 "), replay);
    row.append(links);
    return row;
  });
  body.replaceChildren(...rows);
  $("empty").hidden = games.length > 0;
  document.body.dataset.ready = "true";
}

$("seat-count").addEventListener("change", seatInputs);
seatInputs();
$("new-game").addEventListener("submit", create);
settings();
await refresh();
setInterval(refresh, 5000);
