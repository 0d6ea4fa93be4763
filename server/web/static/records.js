// The club records: standings, recent games, and a search box that opens a player's page.
import { recordGames, recordStandings } from "/client/orchestra.js";
import { gameItem, playerLink, showError } from "/static/records_view.js";

const base = location.origin;
let next = null;

async function standings() {
  const { standings: rows } = await recordStandings(base);
  const list = document.getElementById("standings");
  list.replaceChildren(
    ...rows.map((row) => {
      const item = document.createElement("li");
      const place = document.createElement("span");
      place.className = "place";
      place.textContent = String(row.place);
      const figures = document.createElement("span");
      figures.className = "figures";
      figures.textContent = `${row.wins} wins in ${row.games} games, prestige ${row.average_prestige} on average`;
      item.append(place, playerLink(row.name), figures);
      return item;
    }),
  );
  document.getElementById("no-standings").hidden = rows.length > 0;
}

async function games() {
  const page = await recordGames(base, { limit: 20, after: next ?? undefined });
  document.getElementById("games").append(...page.games.map(gameItem));
  next = page.next;
  document.getElementById("more").hidden = next === null;
}

document.getElementById("search").addEventListener("submit", (event) => {
  event.preventDefault();
  const name = document.getElementById("player").value.trim();
  if (name) location.assign(`/records/players/${encodeURIComponent(name)}`);
});
document.getElementById("more").addEventListener("click", () => games().catch(showError));
Promise.all([standings(), games()]).catch(showError);
