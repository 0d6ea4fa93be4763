// The HTTP calls of the pages that the client library does not make: the open tables' join, the host's
// routes (its token as the Bearer header), and creating a game with open seats. Credentials go only in
// the Authorization header or the body, never in the address. Errors are the library's OrchestraError.

import { OrchestraError } from "/client/orchestra.js";

const API_KEY = "orchestra.apiKey";

async function call(path, { method = "GET", body, bearer } = {}) {
  const headers = {};
  if (bearer) headers.authorization = `Bearer ${bearer}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
    });
  } catch (error) {
    throw new OrchestraError("unreachable", String(error?.message ?? error));
  }
  let answer = null;
  try {
    answer = await response.json();
  } catch {
    /* not JSON: a proxy's page */
  }
  if (response.ok) return answer;
  const code = typeof answer?.code === "string" ? answer.code : `http_${response.status}`;
  const message = typeof answer?.message === "string" ? answer.message : `HTTP ${response.status}`;
  throw new OrchestraError(code, message, { status: response.status, body: answer });
}

const game = (gameId, rest = "") => `/games/${encodeURIComponent(gameId)}${rest}`;

/** The API key this browser keeps for the server (localStorage), or "". */
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

/** What the New game form needs to know of the server: its layouts, and whether it needs an API key. */
export function newGameSettings() {
  return call("/new-game.json");
}

/** POST /games: `players` holds a name, or null for an open seat. */
export function createGame({ players, layout, spectators, open, apiKey }) {
  return call("/games", { method: "POST", body: { players, layout, spectators, open }, bearer: apiKey || undefined });
}

/** POST /games/{id}/join: the lowest open seat of an open table, `{seat, token}`. */
export function joinTable(gameId, name) {
  return call(game(gameId, "/join"), { method: "POST", body: { name } });
}

/** GET /games/{id} (a private game's with its watch token). */
export function readGame(gameId, token) {
  return call(game(gameId), { bearer: token || undefined });
}

/** The host's calls: a seat's new token, closing an open seat, the next game. */
export const host = {
  reissue: (gameId, seat, hostToken) => call(game(gameId, `/seats/${seat}/token`), { method: "POST", bearer: hostToken }),
  close: (gameId, seat, hostToken) => call(game(gameId, `/seats/${seat}/close`), { method: "POST", bearer: hostToken }),
  next: (gameId, hostToken) => call(game(gameId, "/next"), { method: "POST", bearer: hostToken }),
};

const HOSTED = "orchestra.host.";

/** What the host's browser keeps of a game it made (its seats' tokens, its watch token): the seat tokens
 * are shown once, by the creation's answer, and the host page draws their links from here. */
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
