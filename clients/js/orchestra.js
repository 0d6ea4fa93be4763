// The JavaScript client of the Orchestra game server (protocol v1): one ES module, no build step, no
// dependency. It runs in browsers and in Node 20+ (the global WebSocket where there is one, else the
// constructor passed as the `WebSocket` option, such as the `ws` package's). The server serves it at
// GET /client/orchestra.js, and its types at GET /client/orchestra.d.ts.
//
// HTTP: createGame, listGames, getView, getPresence, getEvents, getLegal, getSigningKeys. The websocket:
// connect() -> a Connection that keeps `view` current (applying view deltas itself) and `presence` (who is
// at the table), answers place(), takeBack() and endGame() with promises, and resumes by itself after a
// drop, 1012 or 1013 with `since`, so no envelope is missed or repeated (after 4001, HISTORY_CHANGED, from
// 0). The wall feed: connectWall() -> a WallConnection that keeps `games` (every public game on the wall)
// current from the feed's changes. verifyEnvelope() checks that the server's key wrote an envelope as it
// is, with WebCrypto's Ed25519 and SHA-256.

/** The ids the protocol speaks in, in the rules' order. */
export const ERAS = Object.freeze(["baroque", "classical", "romantic"]);
export const FAMILIES = Object.freeze(["strings", "winds", "percussion_keyboards"]);
export const MATERIALS = Object.freeze(["wood", "metal", "animal"]);

/** Close codes after which resuming cannot help: refused (1008), the game's history unreadable (1011),
 * the seat's token reissued by the host (4003), the seat closed by the host (4004). */
export const FINAL_CLOSE_CODES = Object.freeze([1008, 1011, 4003, 4004]);
/** The server's store no longer holds what the connection was sent (it lost acknowledged writes, and
 * others were written at their versions): the resume takes the whole history again, from version 0. */
export const HISTORY_CHANGED = 4001;

/** The events of a placement: the ones a `PlacementTakenBack` can follow. */
export const PLACEMENT_EVENTS = Object.freeze(["ChairClaimed", "ChairStolen", "PlacedBelowLine"]);

// Resuming: waits drawn at random up to a ceiling that doubles from 100 ms to 2 s ("full jitter"), so
// clients that lost one server together do not all come back in the same instant; given up after 60 s
// without a welcome. The same figures as the Python client's.
const BACKOFF_BASE_MS = 100;
const BACKOFF_CAP_MS = 2000;
const RESUME_FOR_MS = 60000;
const TIMEOUT_MS = 10000;

const OPEN = 1; // WebSocket.OPEN, the same in browsers and in `ws`

/** A refusal: `code` is the wire code (`illegal_space`, `forbidden`...) or one of the client's own:
 * `closed` (the connection ended for good), `timeout`, `unreachable`. */
export class OrchestraError extends Error {
  constructor(code, message, details = {}) {
    super(message);
    this.name = "OrchestraError";
    this.code = code;
    this.status = details.status ?? null; // the HTTP status, for an HTTP refusal
    this.body = details.body ?? null; // the HTTP error body
    this.frame = details.frame ?? null; // the `rejected` frame, for a websocket refusal
    this.version = details.frame?.version ?? null; // the game's version when it refused
    this.closeCode = details.closeCode ?? null; // the websocket close code, when the socket closed
    this.closeReason = details.closeReason ?? null;
  }
}

/** A view delta that does not apply to the view held (a count that differs, a space of another kind, a
 * seat the view does not have): the view held is not the one it applies to. */
export class DeltaMismatch extends Error {
  constructor(message) {
    super(message);
    this.name = "DeltaMismatch";
  }
}

// Words ----------------------------------------------------------------------------------------------

/** An id in words: "percussion_keyboards" -> "Percussion & Keyboards", "violin_bc" -> "Violin Bc". */
export function nameOf(id) {
  return String(id)
    .replace("_keyboards", " & keyboards")
    .replaceAll("_", " ")
    .replace(/(^|\s)\w/g, (c) => c.toUpperCase());
}

/** A token in words: "a Classical performance", "an Oboe instrument", "a Winds repair"; with
 * `{short: true}`, as on a chip: "Classical perf.", "Oboe", "Winds repair". */
export function describeToken(token, { short = false } = {}) {
  let words;
  if (token?.kind === "instrument") words = short ? nameOf(token.instrument) : `${nameOf(token.instrument)} instrument`;
  else if (token?.kind === "performance") words = `${nameOf(token.era)} ${short ? "perf." : "performance"}`;
  else if (token?.kind === "repair") words = `${nameOf(token.family)} repair`;
  else return short ? "?" : "a token";
  if (short) return words;
  return /^[AEIOU]/i.test(words) ? `an ${words}` : `a ${words}`;
}

// HTTP -------------------------------------------------------------------------------------------------

function endpoint(baseUrl, path, query) {
  // Relative to the base's path, so a server behind a path prefix (https://host/orchestra/) works.
  const base = String(baseUrl).endsWith("/") ? String(baseUrl) : `${baseUrl}/`;
  const url = new URL(path, base);
  for (const [key, value] of Object.entries(query ?? {})) {
    if (value !== undefined && value !== null) url.searchParams.set(key, String(value));
  }
  return url;
}

function gamePath(gameId, rest = "") {
  return `games/${encodeURIComponent(gameId)}${rest}`;
}

async function request(baseUrl, path, { query, method = "GET", body, bearer, fetch: fetcher } = {}) {
  const headers = {};
  // Credentials travel only in this header, never in a URL.
  if (bearer) headers.authorization = `Bearer ${bearer}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  const call = fetcher ?? globalThis.fetch;
  let response;
  try {
    response = await call(endpoint(baseUrl, path, query).toString(), {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
    });
  } catch (error) {
    throw new OrchestraError("unreachable", `cannot reach ${baseUrl}: ${error?.message ?? error}`);
  }
  if (response.ok) return response;
  let answer = null;
  try {
    answer = await response.json();
  } catch {
    /* not JSON: a proxy's page */
  }
  const code = typeof answer?.code === "string" ? answer.code : `http_${response.status}`;
  const message = typeof answer?.message === "string" ? answer.message : `HTTP ${response.status}`;
  throw new OrchestraError(code, message, { status: response.status, body: answer });
}

/** POST /games: the created game, with each seat's secret token (shown this once), the `host_token` and,
 * for a private game, its `watch_token`. A `null` in `players` is an open seat; `open: true` lists the
 * game as an open table anyone may join. */
export async function createGame(
  baseUrl,
  { players, layout, private: isPrivate = false, open = false, apiKey, fetch } = {},
) {
  const body = { players };
  if (layout !== undefined) body.layout = layout;
  if (isPrivate) body.spectators = "token";
  if (open) body.open = true;
  return (await request(baseUrl, "games", { method: "POST", body, bearer: apiKey, fetch })).json();
}

/** GET /games/open: the open tables that still have an open seat, newest first. */
export async function openTables(baseUrl, { fetch } = {}) {
  return (await request(baseUrl, "games/open", { fetch })).json();
}

/** POST /games/{id}/join: the lowest open seat of an open table for `name`: `{seat, token}`. */
export async function joinGame(baseUrl, gameId, name, { fetch } = {}) {
  const path = `${gamePath(gameId)}/join`;
  return (await request(baseUrl, path, { method: "POST", body: { name }, fetch })).json();
}

/** The host gives `seat` a new token (POST /games/{id}/seats/{seat}/token): resolves to the token; the
 * old one plays no more. */
export async function reissueToken(baseUrl, gameId, seat, hostToken, { fetch } = {}) {
  const path = `${gamePath(gameId)}/seats/${Number(seat)}/token`;
  return (await (await request(baseUrl, path, { method: "POST", bearer: hostToken, fetch })).json()).token;
}

/** The host closes an open seat before the first placement: `{seat, version}`. */
export async function closeSeat(baseUrl, gameId, seat, hostToken, { fetch } = {}) {
  const path = `${gamePath(gameId)}/seats/${Number(seat)}/close`;
  return (await request(baseUrl, path, { method: "POST", bearer: hostToken, fetch })).json();
}

/** The host starts the ended game's next game, or gets the one started already: resolves to its id. Every
 * token of the ended game (the host's too) does the same in the next one. */
export async function nextGame(baseUrl, gameId, hostToken, { fetch } = {}) {
  const path = `${gamePath(gameId)}/next`;
  return (await (await request(baseUrl, path, { method: "POST", bearer: hostToken, fetch })).json()).game_id;
}

/** GET /games: the public games, newest first. */
export async function listGames(baseUrl, { limit, fetch } = {}) {
  return (await request(baseUrl, "games", { query: { limit }, fetch })).json();
}

/** GET /records/games: ended games of the club records, newest first, and the `next` cursor of the page
 * after (null: the last page). `game` with `token`: a private game to include, by its watch token. */
export async function recordGames(
  baseUrl,
  { player, since, until, layout, limit, after, game, token, fetch } = {},
) {
  const query = { player, since, until, layout, limit, after, game };
  return (await request(baseUrl, "records/games", { query, bearer: token, fetch })).json();
}

/** GET /records/players/{name}: a player's games, wins, average and best prestige, last played. */
export async function recordPlayer(baseUrl, name, { fetch } = {}) {
  return (await request(baseUrl, `records/players/${encodeURIComponent(name)}`, { fetch })).json();
}

/** GET /records/standings: players by wins, then average prestige, each with its place. */
export async function recordStandings(baseUrl, { since, until, fetch } = {}) {
  return (await request(baseUrl, "records/standings", { query: { since, until }, fetch })).json();
}

/** GET /games/{id}: the view now, or `at` version N. `token`: a seat or watch token (private games).
 * The view alone: the `presence` the view now comes with is getPresence's. */
export async function getView(baseUrl, gameId, { at, token, fetch } = {}) {
  const response = await request(baseUrl, gamePath(gameId), { query: { at }, bearer: token, fetch });
  const { presence: _presence, ...view } = await response.json();
  return view;
}

/** Who is at the table now, on every node: GET /games/{id}'s `presence`, `{seats: [{seat, online}],
 * spectators}`. `token`: as for getView. */
export async function getPresence(baseUrl, gameId, { token, fetch } = {}) {
  return (await (await request(baseUrl, gamePath(gameId), { bearer: token, fetch })).json()).presence;
}

/** GET /games/{id}/events: the envelopes after version `after` (0: all), in version order. */
export async function getEvents(baseUrl, gameId, { after, token, fetch } = {}) {
  const text = await (await request(baseUrl, gamePath(gameId, "/events"), { query: { after }, bearer: token, fetch })).text();
  return text
    .split("\n")
    .filter((line) => line.trim())
    .map((line) => JSON.parse(line));
}

/** GET /games/{id}/legal: where `placed` (the token a place command would carry) may go, and the
 * materials a placement there must name at that `skill`. `token`: the credentials, as for getView. */
export async function getLegal(baseUrl, gameId, placed, { skill, token, fetch } = {}) {
  const query = { token: JSON.stringify(placed), skill };
  return (await request(baseUrl, gamePath(gameId, "/legal"), { query, bearer: token, fetch })).json();
}

/** GET /signing-keys: the public keys that verify the server's envelopes (verifyEnvelope takes it). */
export async function getSigningKeys(baseUrl, { fetch } = {}) {
  return (await request(baseUrl, "signing-keys", { fetch })).json();
}

// Views ------------------------------------------------------------------------------------------------

/** The view after a `view_delta` (a new object; `view` is left as it was): `spaces` replaced whole; for
 * each space of `added`, its list cut where the addition starts (before the end only after a take-back),
 * the addition's tokens appended and a standard space's chair set; `score_changes` applied (each seat's
 * `chairs` rebuilt from its counts, in the view's space order); `version` and `ended` the delta's.
 * Throws DeltaMismatch when it does not fit (an addition starting past the end of the list held). */
export function applyDelta(view, delta) {
  const spaces = { ...view.spaces, ...(delta.spaces ?? {}) };
  for (const [id, addition] of Object.entries(delta.added ?? {})) {
    const space = spaces[id];
    const field = addition.kind === "standard" ? "below" : "chairs";
    const start = addition[`${field}_from`];
    if (!space || space.kind !== addition.kind || space[field].length < start) {
      throw new DeltaMismatch(`${id}: the delta does not fit the view held`);
    }
    const extended = { ...space, [field]: [...space[field].slice(0, start), ...addition[field]] };
    if (field === "below") extended.chair = addition.chair;
    spaces[id] = extended;
  }
  const scores = [...(view.scores ?? [])];
  for (const change of delta.score_changes ?? []) {
    const index = scores.findIndex((score) => score.seat === change.seat);
    if (index < 0) throw new DeltaMismatch(`seat ${change.seat}: the view held has no score for it`);
    scores[index] = changedScore(scores[index], change, spaces);
  }
  const { spaces: _spaces, added: _added, score_changes: _changes, ...rest } = delta;
  return { ...view, ...rest, spaces, scores };
}

function changedScore(score, change, spaces) {
  const counts = new Map();
  for (const id of score.chairs) counts.set(id, (counts.get(id) ?? 0) + 1);
  for (const [id, count] of Object.entries(change.held ?? {})) counts.set(id, count);
  for (const [id, count] of counts) {
    if (count > 0 && !(id in spaces)) throw new DeltaMismatch(`seat ${change.seat}: a chair at a space the view held does not have`);
  }
  const chairs = [];
  for (const id of Object.keys(spaces)) {
    for (let n = counts.get(id) ?? 0; n > 0; n -= 1) chairs.push(id);
  }
  return { ...score, prestige: change.prestige, resources: change.resources, chairs };
}

// The websocket ---------------------------------------------------------------------------------------

function socketUrl(baseUrl, gameId) {
  const url = endpoint(baseUrl, gamePath(gameId, "/ws"));
  url.protocol = url.protocol === "https:" ? "wss:" : url.protocol === "http:" ? "ws:" : url.protocol;
  return url.toString();
}

function randomPrefix() {
  const bytes = new Uint8Array(8);
  if (globalThis.crypto?.getRandomValues) globalThis.crypto.getRandomValues(bytes);
  else for (let i = 0; i < bytes.length; i += 1) bytes[i] = Math.floor(Math.random() * 256);
  return Array.from(bytes, (b) => b.toString(36).padStart(2, "0")).join("");
}

function throwLater(error) {
  // A listener's error must not break the connection's bookkeeping; it is reported as uncaught.
  setTimeout(() => {
    throw error;
  }, 0);
}

/** The WebSocket constructor to use: the one given in the options, else the global one. */
function socketClass(options) {
  const Socket = options.WebSocket ?? globalThis.WebSocket;
  if (typeof Socket !== "function") {
    throw new TypeError("there is no global WebSocket here (Node 20): pass one, e.g. { WebSocket } from the ws package");
  }
  return Socket;
}

/** Close a socket politely, ending it after 2 s if the peer does not answer; resolves once closed. */
async function closeSocket(socket) {
  if (!socket || socket.readyState > OPEN) return;
  const done = new Promise((resolve) => socket.addEventListener("close", resolve));
  socket.close(1000);
  const timer = setTimeout(() => socket.terminate?.(), 2000);
  await done;
  clearTimeout(timer);
}

/** Named listeners, for the connections: `on(name, fn)` returns a function that removes it. */
class Listeners {
  constructor() {
    this._listeners = new Map();
  }

  on(name, fn) {
    if (!this._listeners.has(name)) this._listeners.set(name, new Set());
    this._listeners.get(name).add(fn);
    return () => this.off(name, fn);
  }

  off(name, fn) {
    this._listeners.get(name)?.delete(fn);
  }

  _emit(name, ...args) {
    for (const fn of [...(this._listeners.get(name) ?? [])]) {
      try {
        fn(...args);
      } catch (error) {
        throwLater(error);
      }
    }
  }
}

/** What the game and wall connections share beyond their listeners: after a drop, connecting again with
 * backoff and jitter until a first frame, a close code that ends it for good (`_finalCodes`), or
 * `resumeFor` ms without an answer. A subclass gives `_finalCodes`, `_reopen()` (one attempt: resolves
 * at the first frame, rejects with the close code) and `_finish(code, reason, frame)`. */
class Resuming extends Listeners {
  _lost(code, reason) {
    this._socket = null;
    if (this._state === "closed") return;
    if (this._finalCodes.includes(code) || !this._reconnect) {
      this._finish(code, reason, null);
      return;
    }
    this._state = "resuming";
    this._emit("reconnecting", { code, reason });
    this._retry(false, () => this._reopen()).catch(() => {
      /* closed for good: "close" said so */
    });
  }

  // Attempts of `open` until one resolves (returned); a final refusal, or nothing for `resumeFor`,
  // closes the connection for good and throws the last refusal. The first connection (`first`) tries
  // at once.
  async _retry(first, open) {
    const giveUp = Date.now() + this._resumeFor;
    let last = new OrchestraError("unreachable", "no answer");
    for (let attempt = 0; ; attempt += 1) {
      if (Date.now() >= giveUp) {
        this._finish(last.closeCode, `gave up after ${this._resumeFor} ms: ${last.message}`, last.frame);
        throw last;
      }
      if (!first || attempt > 0) {
        await this._sleep(Math.random() * Math.min(BACKOFF_BASE_MS * 2 ** attempt, BACKOFF_CAP_MS));
      }
      if (this._state === "closed") throw new OrchestraError("closed", "the connection is closed");
      try {
        return await open();
      } catch (error) {
        if (this._state === "closed") throw error;
        last = error;
        if (this._finalCodes.includes(error.closeCode)) {
          this._finish(error.closeCode, error.message, error.frame);
          throw error;
        }
        // A drop, 1012 (restarting) or 1013 (busy) before the first frame: again, after a longer wait.
      }
    }
  }

  _sleep(ms) {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this._wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}

/**
 * Connect to a game: resolves at the welcome with a Connection (`role`, `seat`, `version`, `view`).
 * Listeners added with `on()` right after the await (before awaiting anything else) see every frame
 * that follows the welcome.
 *
 * Options: `token` (a seat token: a player; a watch token or none: a spectator), `since` (the last
 * version you hold: the envelopes after it follow the welcome), `view` ("delta", the default; "full";
 * false), `WebSocket` (a constructor, where there is no global one), `reconnect` (true), `timeout` (ms
 * for the welcome and for each command's answer, 10000), `resumeFor` (ms, 60000), `waitForServer`
 * (false: the first connection fails at once; true: it is retried as a resume is).
 */
export async function connect(baseUrl, gameId, options = {}) {
  const connection = new Connection(baseUrl, gameId, options);
  await connection._start(options.since ?? null);
  return connection;
}

export class Connection extends Resuming {
  constructor(baseUrl, gameId, options = {}) {
    super();
    const Socket = socketClass(options);
    this.gameId = gameId;
    this.url = socketUrl(baseUrl, gameId);
    /** "player" or "spectator". */
    this.role = null;
    /** The seat of a player; null for a spectator. */
    this.seat = null;
    /** The highest envelope version delivered (to "events" listeners); a resume asks for what follows. */
    this.version = 0;
    /** The view, kept current from the welcome and each live frame (view.version may trail `version`
     * while the connection resyncs; with `view: false` it stays the welcome's). */
    this.view = null;
    /** The last welcome frame. */
    this.welcome = null;
    /** Who is at the table, on every node: `{seats: [{seat, online}], spectators}` from the last
     * presence frame (one follows each welcome, then one on each change); null before the first. */
    this.presence = null;
    /** The ended game's next game once a next_game frame named it: `{game_id, token?}` (`token`: the one
     * this connection came with, which does the same there; none for a public spectator). */
    this.nextGame = null;
    /** How many times the connection resumed. */
    this.reconnects = 0;
    /** The last envelope delivered (to "events" listeners); null before the first. */
    this.lastEnvelope = null;
    this.closed = new Promise((resolve) => {
      this._resolveClosed = resolve;
    });
    this._Socket = Socket;
    this._token = options.token ?? null;
    this._viewMode = options.view ?? "delta";
    this._reconnect = options.reconnect ?? true;
    this._timeout = options.timeout ?? TIMEOUT_MS;
    this._resumeFor = options.resumeFor ?? RESUME_FOR_MS;
    this._waitForServer = options.waitForServer ?? false;
    this._pending = new Map();
    this._settling = []; // [accepted frame, resolve]: answered, their events not delivered yet
    this._socket = null;
    this._state = "connecting"; // "open", "resuming", "closed"
    this._held = null; // frames after the first welcome, until the caller had a turn to add listeners
    this._prefix = `js-${randomPrefix()}`;
    this._count = 0;
    this._wake = null;
    this._attempt = null; // the socket of a hello not yet welcomed
  }

  /* on(name, fn) calls `fn` on each "events" (envelopes, frame), "view" (view), "welcome" (frame, on each resume),
   * "presence" (presence: who is at the table, after each presence frame), "next_game" ({game_id, token?}:
   * the ended game's next game), "rejected" (a rejection that
   * answers no pending command), "reconnecting" ({code, reason}) or "close" ({code, reason, frame}: the
   * connection ended for good). It returns a function that removes it (see Listeners). */

  /** Send a command frame (an `id` is added when it has none): resolves to its `accepted` frame once its
   * envelopes have been delivered (so `view` and `version` include them), rejects with an OrchestraError
   * whose `code` is the rejection's. Unanswered commands are sent again, with their ids, after a resume
   * (the server answers an id once). */
  send(command, { timeout = this._timeout } = {}) {
    if (this._state === "closed") {
      return Promise.reject(new OrchestraError("closed", "the connection is closed"));
    }
    const frame = { ...command };
    if (frame.id === undefined || frame.id === null) frame.id = `${this._prefix}-${(this._count += 1)}`;
    const already = this._pending.get(frame.id);
    if (already) return already.promise;
    const entry = { frame };
    entry.promise = new Promise((resolve, reject) => {
      entry.resolve = resolve;
      entry.reject = reject;
    });
    if (timeout > 0 && Number.isFinite(timeout)) {
      entry.timer = setTimeout(() => {
        if (this._pending.get(frame.id) !== entry) return;
        this._pending.delete(frame.id);
        entry.reject(new OrchestraError("timeout", `no answer to ${frame.id} within ${timeout} ms`));
      }, timeout);
    }
    this._pending.set(frame.id, entry);
    this._write(frame);
    return entry.promise;
  }

  /** Place a token: `{token, space, skill?, consolation?, materials?, expected_version?, id?}` (the
   * fields of a `place` frame). */
  place(placement, options) {
    return this.send({ ...placement, type: "place" }, options);
  }

  /** Take back this seat's placement while it is the game's last event: `{expected_version?, id?}`.
   * Otherwise it rejects with `cannot_take_back` (`game_over` once the game has ended). */
  takeBack(fields = {}, options) {
    return this.send({ ...fields, type: "take_back" }, options);
  }

  /** The envelope of this seat's placement when it is the last envelope delivered and the game has not
   * ended, else null: when a take-back may be offered (the server still decides: another seat's command
   * may land first). Known only once an envelope has been delivered: connect with `since` to know it from
   * the start. */
  get lastPlacement() {
    const last = this.lastEnvelope;
    if (this._state === "closed" || this.seat === null || !last || last.version !== this.version) return null;
    if (!PLACEMENT_EVENTS.includes(last.event?.type) || last.event.seat !== this.seat) return null;
    return this.view?.ended ? null : last;
  }

  /** End the game (seat 0 only): `{expected_version?, id?}`. */
  endGame(fields = {}, options) {
    return this.send({ ...fields, type: "end_game" }, options);
  }

  /** Name this connection's open seat: rejects with `seat_taken` when it has a name already. */
  takeSeat(name, fields = {}, options) {
    return this.send({ ...fields, name, type: "take_seat" }, options);
  }

  /** Start the ended game's next game, or get the one started already (`game_not_over` before the end);
   * the next_game frame that follows sets `nextGame` and emits "next_game". */
  playAgain(fields = {}, options) {
    return this.send({ ...fields, type: "play_again" }, options);
  }

  /** Close for good; resolves once the socket has closed. */
  async close() {
    const socket = this._socket;
    this._attempt?.close();
    this._finish(1000, "closed by the client", null);
    await closeSocket(socket);
    return this.closed;
  }

  // internals ------------------------------------------------------------------------------------------


  async _start(since) {
    if (this._waitForServer) await this._retry(true, () => this._open(since, true));
    else await this._open(since, true);
  }

  get _finalCodes() {
    return FINAL_CLOSE_CODES;
  }

  _reopen() {
    return this._open(this.version, false);
  }

  _lost(code, reason) {
    if (code === HISTORY_CHANGED) this.version = 0; // the envelopes held are not all the game's any more
    super._lost(code, reason);
  }

  // One socket: the hello, then the welcome (resolves) or the refusal (rejects with its wire code and the
  // close code). A resume's welcome is announced, and the unanswered commands go out again, at once.
  _open(since, first) {
    return new Promise((resolve, reject) => {
      let socket;
      try {
        socket = new this._Socket(this.url);
      } catch (error) {
        reject(new OrchestraError("unreachable", `cannot open ${this.url}: ${error?.message ?? error}`));
        return;
      }
      this._attempt = socket;
      let welcomed = false;
      let refusal = null;
      let failure = null;
      const timer = setTimeout(() => {
        failure = new OrchestraError("timeout", `no welcome within ${this._timeout} ms`);
        socket.close();
      }, this._timeout);
      socket.addEventListener("open", () => {
        socket.send(JSON.stringify({ type: "hello", token: this._token, since, view: this._viewMode }));
      });
      socket.addEventListener("error", () => {
        /* the close event follows, and says how it ended */
      });
      socket.addEventListener("message", (message) => {
        let frame;
        try {
          frame = JSON.parse(message.data);
        } catch {
          return; // not JSON: not a frame of this protocol
        }
        if (welcomed) {
          this._receive(socket, frame);
        } else if (frame.type === "welcome") {
          welcomed = true;
          clearTimeout(timer);
          this._attempt = null;
          if (this._state === "closed") {
            socket.close(1000);
            reject(new OrchestraError("closed", "the connection is closed"));
            return;
          }
          this._socket = socket;
          this._state = "open";
          this._welcomed(frame, since);
          if (first) {
            // The caller of connect() gets its turn to add listeners before the frames that follow.
            this._holdUntilNextTurn();
          } else {
            this.reconnects += 1;
            this._emit("welcome", frame);
            this._emit("view", this.view);
            for (const entry of this._pending.values()) this._write(entry.frame);
          }
          resolve(frame);
        } else if (frame.type === "rejected") {
          refusal = frame; // the close follows
        }
      });
      socket.addEventListener("close", (event) => {
        clearTimeout(timer);
        if (this._attempt === socket) this._attempt = null;
        if (!welcomed) {
          const details = { frame: refusal, closeCode: event.code, closeReason: event.reason };
          if (failure) reject(failure);
          else if (refusal) reject(new OrchestraError(refusal.code, refusal.message, details));
          else reject(new OrchestraError("unreachable", `closed before the welcome (${event.code})`, details));
        } else if (this._socket === socket) {
          this._lost(event.code, event.reason);
        }
      });
    });
  }

  _welcomed(frame, since) {
    this.welcome = frame;
    this.role = frame.role;
    this.seat = frame.seat ?? null;
    this.view = frame.view;
    // Without `since` no history follows; with it, what follows starts after it (or after the version
    // the server has, when `since` was past it).
    if (since === null) this.version = frame.version;
    else this.version = Math.max(this.version, Math.min(since, frame.version));
  }

  _holdUntilNextTurn() {
    this._held = [];
    setTimeout(() => {
      const held = this._held ?? [];
      this._held = null;
      for (const [socket, frame] of held) this._process(socket, frame);
    }, 0);
  }

  _receive(socket, frame) {
    if (this._held) this._held.push([socket, frame]);
    else this._process(socket, frame);
  }

  _process(socket, frame) {
    if (socket !== this._socket) return; // a socket given up (a resync): its resume brings it all again
    if (frame.type === "events") {
      this._events(frame);
    } else if (frame.type === "accepted" || frame.type === "rejected") {
      const entry = typeof frame.id === "string" ? this._pending.get(frame.id) : undefined;
      if (entry) {
        this._pending.delete(frame.id);
        clearTimeout(entry.timer);
        if (frame.type === "rejected") entry.reject(new OrchestraError(frame.code, frame.message, { frame }));
        else if (frame.version <= this.version) entry.resolve(frame);
        // The answer may come before the events frame: it resolves once the view holds its events.
        else this._settling.push([frame, entry.resolve]);
      } else if (frame.type === "rejected") {
        this._emit("rejected", frame);
      }
    } else if (frame.type === "presence") {
      this.presence = { seats: frame.seats, spectators: frame.spectators };
      this._emit("presence", this.presence);
    } else if (frame.type === "next_game") {
      const { type: _type, ...next } = frame;
      this.nextGame = next;
      this._emit("next_game", next);
    }
    // Any other type is one this client does not know: ignored, as the protocol asks.
  }

  _events(frame) {
    const fresh = [];
    for (const envelope of frame.envelopes ?? []) {
      if (envelope.version <= this.version + fresh.length) continue; // already delivered
      if (envelope.version !== this.version + fresh.length + 1) {
        this._resync(); // a gap: something was lost on the way; the resume brings it
        return;
      }
      fresh.push(envelope);
    }
    if (!fresh.length) return;
    let viewChanged = false;
    let mismatch = false;
    if (frame.view) {
      this.view = frame.view;
      viewChanged = true;
    } else if (frame.view_delta && this.view) {
      // A delta applies to the view of the version just before its first envelope: never guess.
      try {
        if (this.view.version !== fresh[0].version - 1) throw new DeltaMismatch("the view held is not the delta's base");
        this.view = applyDelta(this.view, frame.view_delta);
        viewChanged = true;
      } catch (error) {
        if (!(error instanceof DeltaMismatch)) throw error;
        mismatch = true;
      }
    }
    this.version = fresh[fresh.length - 1].version;
    this.lastEnvelope = fresh[fresh.length - 1];
    this._emit("events", fresh, frame);
    this._settle();
    if (viewChanged) this._emit("view", this.view);
    if (mismatch) this._resync(); // the resume's welcome brings the whole view
  }

  // Resolve the accepted commands whose envelopes have now been delivered (all of them when closing).
  _settle(all = false) {
    if (!this._settling.length) return;
    const waiting = this._settling;
    this._settling = [];
    for (const [frame, resolve] of waiting) {
      if (all || frame.version <= this.version) resolve(frame);
      else this._settling.push([frame, resolve]);
    }
  }

  _write(frame) {
    const socket = this._socket;
    if (this._state === "open" && socket && socket.readyState === OPEN) socket.send(JSON.stringify(frame));
    // Otherwise it goes out with the other unanswered commands once the connection has resumed.
  }

  // Give up the current socket and resume from `version`.
  _resync() {
    const socket = this._socket;
    if (!socket) return;
    this._socket = null;
    socket.close(1000);
    this._lost(null, "resync");
  }

  _finish(code, reason, frame) {
    if (this._state === "closed") return;
    this._state = "closed";
    this._socket = null;
    this._held = null;
    this._wake?.();
    const info = { code, reason, frame };
    this._closedInfo = info;
    for (const entry of this._pending.values()) {
      clearTimeout(entry.timer);
      entry.reject(new OrchestraError("closed", `the connection closed: ${reason}`, { closeCode: code, closeReason: reason, frame }));
    }
    this._pending.clear();
    this._settle(true); // accepted, whatever became of their events frame
    this._resolveClosed(info);
    this._emit("close", info);
  }
}

// Verifying envelopes ------------------------------------------------------------------------------------

// Every envelope proves on its own that the server's key wrote it (docs/protocol.md section 7): its body
// (the envelope without `proof`) is a leaf of a Merkle tree (RFC 6962 hashing) whose root the key signed in
// a checkpoint, and `proof` holds the leaf's path to that root and the checkpoint. The body's bytes are
// the envelope's JSON.stringify: the server writes compact JSON in field order, which JSON.parse keeps (no
// object of an envelope has integer-like keys, which it would put first), so no raw line is needed.
const ENVELOPE_CONTEXT = "orchestra-envelope-v1\n";
const CHECKPOINT_CONTEXT = "orchestra-checkpoint-v1";
const HEX_HASH = /^[0-9a-f]{64}$/;
const UTF8 = new TextEncoder();
// A keys object's imported keys and the checkpoints already checked with them: a game's envelopes, and a
// batch's across games, share a checkpoint, whose signature is then checked once.
const verifiers = new WeakMap();
const CHECKED_CHECKPOINTS = 65536;

function subtle() {
  const found = globalThis.crypto?.subtle;
  if (!found) throw new Error("no WebCrypto here (crypto.subtle): envelopes cannot be verified");
  return found;
}

function concat(...parts) {
  const out = new Uint8Array(parts.reduce((total, part) => total + part.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

async function sha256(...parts) {
  return new Uint8Array(await subtle().digest("SHA-256", concat(...parts)));
}

function toHex(bytes) {
  return Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
}

function fromHex(text) {
  const out = new Uint8Array(text.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(text.slice(2 * i, 2 * i + 2), 16);
  return out;
}

function fromBase64(text) {
  if (typeof text !== "string" || !/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4) return null;
  return Uint8Array.from(atob(text), (char) => char.charCodeAt(0));
}

const LEAF = new Uint8Array([0]);
const NODE = new Uint8Array([1]);

/** The root a leaf hash and its path lead to, for leaf `index` of a tree of `size` leaves (RFC 9162
 * section 2.1.3.2); null when the path cannot be one of such a leaf. */
async function rootFromPath(leaf, index, size, path) {
  if (!(index >= 0 && index < size)) return null;
  let node = index;
  let last = size - 1;
  let hashed = leaf;
  for (const sibling of path) {
    if (last === 0) return null; // more hashes than the tree has levels
    if (node % 2 === 1 || node === last) {
      hashed = await sha256(NODE, sibling, hashed);
      // The right edge of an unbalanced tree: climb to where a sibling is.
      if (node % 2 === 0) {
        while (node > 0 && node % 2 === 0) {
          node = Math.floor(node / 2);
          last = Math.floor(last / 2);
        }
      }
    } else {
      hashed = await sha256(NODE, hashed, sibling);
    }
    node = Math.floor(node / 2);
    last = Math.floor(last / 2);
  }
  return last === 0 ? hashed : null;
}

function verifierOf(keys) {
  let verifier = verifiers.get(keys);
  if (!verifier) {
    const listed = Array.isArray(keys) ? keys : keys?.keys;
    if (!Array.isArray(listed)) throw new TypeError("keys: GET /signing-keys's answer, or its `keys` list");
    verifier = { keys: new Map(), checked: new Set() };
    for (const entry of listed) {
      const raw = fromBase64(entry?.public_key);
      if (!raw || raw.length !== 32) continue;
      // The id is the key's own (its SHA-256's first 16 hex digits), whatever the listing calls it.
      const key = sha256(raw).then(async (digest) => {
        let imported;
        try {
          imported = await subtle().importKey("raw", raw, { name: "Ed25519" }, false, ["verify"]);
        } catch (error) {
          throw new Error(`this runtime's WebCrypto has no Ed25519: envelopes cannot be verified (${error})`);
        }
        const retiredAt = entry.retired_at ? Date.parse(entry.retired_at) : null;
        return { id: toHex(digest).slice(0, 16), key: imported, retiredAt };
      });
      verifier.keys.set(entry.public_key, key);
    }
    verifiers.set(keys, verifier);
  }
  return verifier;
}

async function trustedKey(verifier, kid) {
  for (const pending of verifier.keys.values()) {
    const key = await pending;
    if (key.id === kid) return key;
  }
  return null;
}

async function ed25519(key, signature, data) {
  const raw = fromBase64(signature);
  if (!raw || raw.length !== 64) return false;
  return subtle().verify({ name: "Ed25519" }, key.key, raw, data);
}

/** Check that the server's key wrote `envelope` as it is: its proof's path from the envelope's body to
 * the checkpoint's root, and the checkpoint's signature by a key of `keys` (GET /signing-keys's answer or
 * its `keys` list; checked checkpoints are remembered per keys object). Envelopes signed alone (`sig`,
 * before batches) are checked against their own signature. Resolves to `{ok: true}` or `{ok: false,
 * problem}`; throws only where this runtime has no WebCrypto Ed25519. */
export async function verifyEnvelope(envelope, keys) {
  const verifier = verifierOf(keys);
  if (envelope === null || typeof envelope !== "object") return { ok: false, problem: "not an envelope" };
  const { proof, ...body } = envelope;
  if (proof == null && typeof envelope.sig !== "string") return { ok: false, problem: "not signed" };
  const kid = envelope.key;
  if (typeof kid !== "string") return { ok: false, problem: "signed, but names no key" };
  const key = await trustedKey(verifier, kid);
  if (!key) return { ok: false, problem: `signed by key ${kid}, which is not one of the trusted keys` };
  if (key.retiredAt !== null && !(Date.parse(envelope.at) < key.retiredAt)) {
    return {
      ok: false,
      problem: `signed by key ${kid} and dated ${envelope.at}, not before its retirement: a retired key vouches only for what it signed before`,
    };
  }
  if (proof == null) {
    const { sig, ...signed } = envelope;
    const data = UTF8.encode(ENVELOPE_CONTEXT + JSON.stringify(signed));
    if (!(await ed25519(key, sig, data))) {
      return { ok: false, problem: `bad signature (key ${kid}): the envelope was altered` };
    }
    return { ok: true };
  }
  const fields = Object.keys(body);
  if ("sig" in body || fields[fields.length - 1] !== "key") {
    return { ok: false, problem: "a proof must follow the key, as the only field after it" };
  }
  const { index, size, path, root, at, sig } = proof;
  if (
    !Number.isSafeInteger(index) ||
    !Number.isSafeInteger(size) ||
    !Array.isArray(path) ||
    typeof root !== "string" ||
    typeof at !== "string" ||
    typeof sig !== "string"
  ) {
    return { ok: false, problem: "the proof is not an inclusion path and a checkpoint" };
  }
  if (!path.every((hash) => typeof hash === "string" && HEX_HASH.test(hash))) {
    return { ok: false, problem: "the proof's path holds a hash that is not 32 bytes of hex" };
  }
  const leaf = await sha256(LEAF, UTF8.encode(JSON.stringify(body)));
  const reached = await rootFromPath(leaf, index, size, path.map(fromHex));
  if (reached === null) return { ok: false, problem: `the proof's path cannot be one of leaf ${index} of ${size}` };
  if (toHex(reached) !== root) {
    return {
      ok: false,
      problem: `bad signature (key ${kid}): the envelope or its proof was altered (its inclusion path does not lead to the signed root)`,
    };
  }
  const text = `${CHECKPOINT_CONTEXT}\n${size}\n${root}\n${kid}\n${at}\n`;
  const remembered = text + sig;
  if (!verifier.checked.has(remembered)) {
    if (!(await ed25519(key, sig, UTF8.encode(text)))) {
      return { ok: false, problem: `bad checkpoint signature (key ${kid}): the checkpoint or the signature was altered` };
    }
    if (verifier.checked.size >= CHECKED_CHECKPOINTS) verifier.checked.clear();
    verifier.checked.add(remembered);
  }
  return { ok: true };
}

// The wall feed ---------------------------------------------------------------------------------------

/** The games held after a `wall_changes` frame (a new Map; `games` is left as it was), in the wall's
 * order: `retired` removed, `added` put first (in the frame's order), each of `changed` updated (its
 * fields replaced, of `chairs` only the spaces it names), and a game that ends moved to the head of the
 * ended games. A change naming a game not held is ignored (the server sends changes of held games only). */
export function applyWallChanges(games, frame) {
  const retired = new Set(frame.retired ?? []);
  const held = new Map();
  for (const game of frame.added ?? []) held.set(game.game_id, game);
  for (const [id, game] of games) if (!retired.has(id) && !held.has(id)) held.set(id, game);
  const ending = new Set();
  for (const change of frame.changed ?? []) {
    const game = held.get(change.game_id);
    if (!game) continue;
    const { game_id: _id, chairs, ...fields } = change;
    const updated = { ...game, ...fields };
    if (chairs) updated.chairs = { ...game.chairs, ...chairs };
    held.set(change.game_id, updated);
    if (change.ended === true && !game.ended) ending.add(change.game_id);
  }
  if (!ending.size) return held;
  // The games that just ended go first among the ended ones, in the frame's order.
  const ordered = new Map();
  const moved = [...ending].map((id) => [id, held.get(id)]);
  let placed = false;
  for (const [id, game] of held) {
    if (ending.has(id)) continue;
    if (!placed && game.ended) {
      for (const [movedId, movedGame] of moved) ordered.set(movedId, movedGame);
      placed = true;
    }
    ordered.set(id, game);
  }
  if (!placed) for (const [movedId, movedGame] of moved) ordered.set(movedId, movedGame);
  return ordered;
}

function wallUrl(baseUrl) {
  const url = endpoint(baseUrl, "wall/ws");
  url.protocol = url.protocol === "https:" ? "wss:" : url.protocol === "http:" ? "ws:" : url.protocol;
  return url.toString();
}

/**
 * Follow the wall feed (GET /wall/ws): resolves at its first `wall` frame with a WallConnection whose
 * `games` (a Map of game id to summary, in the wall's order) it keeps current. Listeners added with `on()`
 * right after the await see every frame that follows.
 *
 * Options: `WebSocket` (a constructor, where there is no global one), `reconnect` (true: after a drop,
 * 1012 or 1013, connect again; the new `wall` frame replaces `games`), `timeout` (ms for the first frame,
 * 10000), `resumeFor` (ms, 60000), `waitForServer` (false).
 */
export async function connectWall(baseUrl, options = {}) {
  const connection = new WallConnection(baseUrl, options);
  await connection._start();
  return connection;
}

export class WallConnection extends Resuming {
  constructor(baseUrl, options = {}) {
    super();
    const Socket = socketClass(options);
    this.url = wallUrl(baseUrl);
    /** The games on the wall, by id, in the wall's order. */
    this.games = new Map();
    /** How many ended games the wall keeps (from its `wall` frame). */
    this.endedKept = 0;
    /** How many games the wall shows in all: `games` holds a page of them, more() asks for another. */
    this.total = 0;
    /** How many times the connection connected again. */
    this.reconnects = 0;
    this.closed = new Promise((resolve) => {
      this._resolveClosed = resolve;
    });
    this._Socket = Socket;
    this._reconnect = options.reconnect ?? true;
    this._timeout = options.timeout ?? TIMEOUT_MS;
    this._resumeFor = options.resumeFor ?? RESUME_FOR_MS;
    this._waitForServer = options.waitForServer ?? false;
    this._socket = null;
    this._state = "connecting"; // "open", "resuming", "closed"
    this._held = null;
    this._wake = null;
  }

  /* on(name, fn) calls `fn` on each "wall" (games: after each `wall` frame, the first one's included only for
   * listeners added later), "changes" ({added, changed, retired}, frame), "page" (games added by a
   * `wall_page`, frame), "reconnecting" ({code, reason}) or "close" ({code, reason}). It returns a
   * function that removes it (see Listeners). */

  /** Ask for another page of the wall (the next most active games not held): its games are added after
   * those held, and "page" is emitted. False when the connection is not open. */
  more() {
    if (this._state !== "open" || !this._socket) return false;
    this._socket.send(JSON.stringify({ type: "wall_more" }));
    return true;
  }

  /** Close for good; resolves once the socket has closed. */
  async close() {
    const socket = this._socket;
    this._finish(1000, "closed by the client");
    await closeSocket(socket);
    return this.closed;
  }


  async _start() {
    if (this._waitForServer) await this._retry(true, () => this._open(true));
    else await this._open(true);
  }

  // The feed is refused for good only by a policy close.
  get _finalCodes() {
    return [1008];
  }

  _reopen() {
    return this._open(false);
  }

  _open(first) {
    return new Promise((resolve, reject) => {
      let socket;
      try {
        socket = new this._Socket(this.url);
      } catch (error) {
        reject(new OrchestraError("unreachable", `cannot open ${this.url}: ${error?.message ?? error}`));
        return;
      }
      let started = false;
      const timer = setTimeout(() => socket.close(), this._timeout);
      socket.addEventListener("error", () => {
        /* the close event follows */
      });
      socket.addEventListener("message", (message) => {
        let frame;
        try {
          frame = JSON.parse(message.data);
        } catch {
          return;
        }
        if (started) {
          if (this._held) this._held.push([socket, frame]);
          else this._process(socket, frame);
        } else if (frame.type === "wall") {
          started = true;
          clearTimeout(timer);
          if (this._state === "closed") {
            socket.close(1000);
            reject(new OrchestraError("closed", "the connection is closed"));
            return;
          }
          this._socket = socket;
          this._state = "open";
          this._wall(frame);
          if (first) {
            this._held = [];
            setTimeout(() => {
              const held = this._held ?? [];
              this._held = null;
              for (const [from, later] of held) this._process(from, later);
            }, 0);
          } else {
            this.reconnects += 1;
            this._emit("wall", this.games);
          }
          resolve(frame);
        }
      });
      socket.addEventListener("close", (event) => {
        clearTimeout(timer);
        if (!started) {
          const details = { closeCode: event.code, closeReason: event.reason };
          reject(new OrchestraError("unreachable", `closed before the wall frame (${event.code})`, details));
        } else if (this._socket === socket) {
          this._lost(event.code, event.reason);
        }
      });
    });
  }

  _wall(frame) {
    this.games = new Map(frame.games.map((game) => [game.game_id, game]));
    this.endedKept = frame.ended_kept;
    this.total = frame.total ?? this.games.size;
  }

  _process(socket, frame) {
    if (socket !== this._socket) return;
    if (frame.type === "wall") {
      this._wall(frame);
      this._emit("wall", this.games);
    } else if (frame.type === "wall_changes") {
      this.games = applyWallChanges(this.games, frame);
      this.total = frame.total ?? this.total;
      this._emit("changes", { added: frame.added, changed: frame.changed, retired: frame.retired }, frame);
    } else if (frame.type === "wall_page") {
      const added = frame.games.filter((game) => !this.games.has(game.game_id));
      for (const game of added) this.games.set(game.game_id, game);
      this.total = frame.total;
      this._emit("page", added, frame);
    }
    // Any other type is one this client does not know: ignored, as the protocol asks.
  }

  _finish(code, reason) {
    if (this._state === "closed") return;
    this._state = "closed";
    this._socket = null;
    this._held = null;
    this._wake?.();
    const info = { code, reason };
    this._resolveClosed(info);
    this._emit("close", info);
  }
}
