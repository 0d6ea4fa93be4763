// The list of games: public games, live and ended, refreshed every few seconds.

import { listGames } from "/client/orchestra.js";
import { $, el, origin, seatDot, showError } from "./render.js";

const body = $("games").querySelector("tbody");

async function refresh() {
  let games;
  try {
    games = await listGames(origin);
    showError("");
  } catch (error) {
    showError(`Cannot list the games: ${error.code}: ${error.message}`);
    return;
  }
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
      players.append(el("span", `name seat-${seat % 4}`, name));
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

await refresh();
setInterval(refresh, 5000);
