// The replay page: the board at any version of a game's history (slider, buttons, arrow keys; ?at=N).

import { getEvents, getView } from "/client/orchestra.js";
import { $, Board, gameId, linkWithSecret, origin, secret, setTitle, showError } from "./render.js";

setTitle(`replay of game ${gameId}`);
$("watch-link").href = linkWithSecret(`/games/${encodeURIComponent(gameId)}/watch`);

async function replay() {
  let envelopes;
  try {
    envelopes = await getEvents(origin, gameId, { token: secret });
  } catch (error) {
    showError(`Cannot read the game: ${error.code}: ${error.message}`);
    return;
  }
  const created = envelopes[0].event;
  const board = new Board($("board"), created.layout, created.players);
  const last = envelopes[envelopes.length - 1].version;
  const log = $("log");
  const lines = new Map();
  for (const envelope of envelopes) {
    const line = board.logLine(envelope);
    lines.set(envelope.version, line);
    log.prepend(line);
  }
  const slider = $("slider");
  slider.max = String(last);
  const views = new Map();
  let wanted = 0;

  async function go(target) {
    const at = Math.max(1, Math.min(last, Number.parseInt(target, 10) || last));
    wanted = at;
    slider.value = String(at);
    $("position").textContent = `version ${at} of ${last}`;
    for (const [version, line] of lines) {
      line.classList.toggle("future", version > at);
      line.classList.toggle("current", version === at);
    }
    $("current").replaceChildren(...lines.get(at).querySelector(".text").cloneNode(true).childNodes);
    history.replaceState(null, "", `?at=${at}${location.hash}`);
    try {
      if (!views.has(at)) views.set(at, await getView(origin, gameId, { at, token: secret }));
    } catch (error) {
      showError(`Cannot read version ${at}: ${error.code}: ${error.message}`);
      return;
    }
    if (wanted === at) board.render(views.get(at), true);
  }

  slider.addEventListener("input", () => go(slider.value));
  $("first").addEventListener("click", () => go(1));
  $("prev").addEventListener("click", () => go(wanted - 1));
  $("next").addEventListener("click", () => go(wanted + 1));
  $("last").addEventListener("click", () => go(last));
  document.addEventListener("keydown", (event) => {
    if (event.target === slider || event.altKey || event.ctrlKey || event.metaKey) return;
    const moves = { ArrowLeft: wanted - 1, ArrowRight: wanted + 1, Home: 1, End: last };
    if (!(event.key in moves)) return;
    event.preventDefault();
    go(moves[event.key]);
  });
  await go(new URLSearchParams(location.search).get("at") ?? last);
  document.body.dataset.ready = "true";
}

replay();
