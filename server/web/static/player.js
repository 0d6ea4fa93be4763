// A player's record: the figures, a small chart of their prestige over time, and their games.
import { recordGames, recordPlayer } from "/client/orchestra.js";
import { gameItem, showError } from "/static/records_view.js";

const base = location.origin;
const name = decodeURIComponent(location.pathname.split("/").pop());
let next = null;
const points = [];

function summary(record) {
  document.getElementById("name").textContent = record.name;
  document.title = `Orchestra: ${record.name}`;
  const list = document.getElementById("summary");
  const rows = [
    ["games", record.games],
    ["wins", record.wins],
    ["average prestige", record.average_prestige],
    ["best prestige", record.best_prestige],
    ["last played", `${record.last_played.slice(0, 16).replace("T", " ")} UTC`],
  ];
  list.replaceChildren(
    ...rows.flatMap(([label, value]) => {
      const term = document.createElement("dt");
      term.textContent = label;
      const data = document.createElement("dd");
      data.textContent = String(value);
      return [term, data];
    }),
  );
}

function chart() {
  const svg = document.getElementById("chart");
  const ns = "http://www.w3.org/2000/svg";
  const ordered = [...points].reverse(); // oldest first, left to right
  const top = Math.max(1, ...ordered.map((p) => p.prestige));
  const step = ordered.length > 1 ? 300 / (ordered.length - 1) : 0;
  const xy = ordered.map((p, i) => [10 + i * step, 110 - (p.prestige / top) * 100]);
  const line = document.createElementNS(ns, "polyline");
  line.setAttribute("points", xy.map(([x, y]) => `${x},${y}`).join(" "));
  const dots = xy.map(([x, y]) => {
    const dot = document.createElementNS(ns, "circle");
    dot.setAttribute("cx", String(x));
    dot.setAttribute("cy", String(y));
    dot.setAttribute("r", "3");
    return dot;
  });
  svg.replaceChildren(line, ...dots);
}

async function games() {
  const page = await recordGames(base, { player: name, limit: 50, after: next ?? undefined });
  document.getElementById("games").append(...page.games.map(gameItem));
  const key = name.normalize("NFKC").toLowerCase();
  for (const game of page.games) {
    const seat = game.players.find((s) => s.name?.normalize("NFKC").toLowerCase() === key);
    if (seat && seat.rank !== null) points.push({ at: game.ended_at, prestige: seat.prestige });
  }
  chart();
  next = page.next;
  document.getElementById("more").hidden = next === null;
}

document.getElementById("more").addEventListener("click", () => games().catch(showError));
recordPlayer(base, name)
  .then((record) => {
    summary(record);
    return games();
  })
  .catch(showError);
