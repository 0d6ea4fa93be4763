// What this browser keeps (localStorage) for the pages: the server's API key, and for each game it made,
// its seats' tokens and its watch token (shown once, by the creation's answer; the host page draws the
// seats' links from them). Nothing kept here is ever put in an address the browser sends.

const API_KEY = "orchestra.apiKey";
const HOSTED = "orchestra.host.";

/** The API key this browser keeps for the server, or "". */
export function storedApiKey() {
  try {
    return localStorage.getItem(API_KEY) || "";
  } catch {
    return "";
  }
}

export function storeApiKey(key) {
  try {
    if (key) localStorage.setItem(API_KEY, key);
    else localStorage.removeItem(API_KEY);
  } catch {
    /* storage refused (a private window): the key is asked again next time */
  }
}

/** What this browser keeps of a game it made: `{seats: {seat: token}, watch_token}`. */
export function hosted(gameId) {
  try {
    return JSON.parse(localStorage.getItem(HOSTED + gameId) || "null") ?? { seats: {}, watch_token: null };
  } catch {
    return { seats: {}, watch_token: null };
  }
}

export function keepHosted(gameId, kept) {
  try {
    localStorage.setItem(HOSTED + gameId, JSON.stringify(kept));
  } catch {
    /* storage refused: the host page offers a new link per seat instead */
  }
}
