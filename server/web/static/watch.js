// The watch page: the live board of one game.

import { livePage } from "./live.js";
import { $, gameId, linkWithSecret, setTitle } from "./render.js";

setTitle(`game ${gameId}`);
$("replay-link").href = linkWithSecret(`/games/${encodeURIComponent(gameId)}/replay`);
livePage();
