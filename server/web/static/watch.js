// The watch page: the live board of one game. With `?embed=1`, the board and the scores alone, on a
// transparent background (for stream overlays): no header, no log.

import { livePage } from "./live.js";
import { $, gameId, linkWithSecret, setTitle } from "./render.js";

if (new URLSearchParams(location.search).get("embed") === "1") {
  document.documentElement.classList.add("embed");
  document.querySelector("header.top")?.remove();
  $("log")?.closest("section")?.remove();
  document.title = `Orchestra: game ${gameId}`;
} else {
  setTitle(`game ${gameId}`);
  $("replay-link").href = linkWithSecret(`/games/${encodeURIComponent(gameId)}/replay`);
}
livePage();
