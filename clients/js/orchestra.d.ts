// Types of orchestra.js, the JavaScript client of the Orchestra game server (protocol v1), and of the
// protocol's wire shapes (docs/protocol.md). The shapes bear the names of GET /schema.json's `$defs`, with
// the same fields, optional where the schema does not require them (tests/js checks both). Field names
// are the wire's. New fields may be added within v1: ignore fields you do not know.

// Ids -------------------------------------------------------------------------------------------------

export type Era = "baroque" | "classical" | "romantic";
export type Family = "strings" | "winds" | "percussion_keyboards";
export type Material = "wood" | "metal" | "animal";
export type Consolation = "money" | "inspiration";
export type Resource = "money" | "inspiration" | "apprentice" | "instrument_card" | "wood" | "metal" | "animal";
export type Role = "player" | "spectator";
export type Spectators = "public" | "token";
/** A hello's `view`: "delta" (the default), "full" (`true` is v1's spelling of it), or `false` (none). */
export type ViewMode = "delta" | "full" | boolean;

/** Resources gained or held; a map never holds a zero. */
export type Amounts = { [resource: string]: number };

export const ERAS: readonly Era[];
export const FAMILIES: readonly Family[];
export const MATERIALS: readonly Material[];
/** 1008 (refused), 1011 (damaged game), 4003 (the seat's token reissued by the host) and 4004 (the seat
 * closed by the host): a connection closed with one of them does not resume. */
export const FINAL_CLOSE_CODES: readonly number[];
/** 4001: the server's store lost envelopes this connection was sent; it resumes from version 0, so the
 * history follows again whole ("reconnecting" tells the code first: drop what you logged). */
export const HISTORY_CHANGED: 4001;
/** The events of a placement: the ones a `PlacementTakenBack` can follow. */
export const PLACEMENT_EVENTS: readonly ["ChairClaimed", "ChairStolen", "PlacedBelowLine"];

// Tokens ----------------------------------------------------------------------------------------------

export interface InstrumentToken {
  kind: "instrument";
  instrument: string;
}
export interface PerformanceToken {
  kind: "performance";
  era: Era;
}
export interface RepairToken {
  kind: "repair";
  family: Family;
}
export type Token = InstrumentToken | PerformanceToken | RepairToken;

/** A token on the board and the seat that placed it. */
export interface Seated {
  seat: number;
  token: Token;
}

// The layout (GameCreated carries the whole of it) -----------------------------------------------------

export interface SpaceDef {
  id: string;
  instrument: string;
  family: Family;
  /** Empty for a rare space; two eras for a space straddling them (the Violins). */
  eras: Era[];
  /** The First Chair's bonus: resources, or `material_choice` (that many materials of the player's). */
  bonus: { [key: string]: number };
  /** Per chair (3 when absent). */
  prestige?: number;
}
export interface Layout {
  name: string;
  verified: boolean;
  spaces: SpaceDef[];
}

// The view --------------------------------------------------------------------------------------------

export interface ChairSpaceView {
  kind: "standard";
  chair: Seated | null;
  below: Seated[];
}
export interface RareSpaceView {
  kind: "rare";
  chairs: Seated[];
}
export type SpaceView = ChairSpaceView | RareSpaceView;

export interface Score {
  seat: number;
  /** Space ids of the First Chairs held, in layout order (a rare space once per chair). */
  chairs: string[];
  prestige: number;
  resources: Amounts;
}
export interface PlayerView {
  seat: number;
  /** null while the seat is open (its player has not named themselves). */
  name: string | null;
  /** Present (true) only for a seat the host closed: it takes no part. */
  closed?: boolean;
}
export interface View {
  game_id: string;
  version: number;
  ended: boolean;
  players: PlayerView[];
  spaces: { [space: string]: SpaceView };
  scores: Score[];
}

/** A standard space's new end: its `below` cut to `below_from` tokens (fewer than held only after a
 * take-back), then `below` appended; its chair replaced. */
export interface ChairSpaceAdded {
  kind: "standard";
  chair: Seated | null;
  below_from: number;
  below: Seated[];
}
/** A rare space's new end: its `chairs` cut to `chairs_from` (fewer than held only after a take-back),
 * then `chairs` appended. */
export interface RareSpaceAdded {
  kind: "rare";
  chairs_from: number;
  chairs: Seated[];
}
export type SpaceAdded = ChairSpaceAdded | RareSpaceAdded;
export interface ScoreChange {
  seat: number;
  prestige: number;
  resources: Amounts;
  /** The new number of First Chairs at each space where it changed (0: the last one was lost). */
  held: { [space: string]: number };
}
export interface ViewDelta {
  version: number;
  ended: boolean;
  spaces: { [space: string]: SpaceView };
  added: { [space: string]: SpaceAdded };
  score_changes: ScoreChange[];
  /** The players, whole, when a seat was taken or closed. */
  players?: PlayerView[];
}

// Events and envelopes ----------------------------------------------------------------------------------

export interface Rank {
  seat: number;
  rank: number;
  prestige: number;
}
export interface GameCreated {
  type: "GameCreated";
  game_id: string;
  /** null: an open seat. */
  players: (string | null)[];
  layout: Layout;
  // Always sent by this server; absent from envelopes stored before they existed.
  spectators?: Spectators;
  max_placements?: number;
  rules_version?: number;
  /** An open table. */
  open?: boolean;
  /** Seats closed from the start (a next game's). */
  closed?: number[];
  /** The ended game this one is the next game of. */
  follows?: string | null;
}
/** An open seat's player named themselves. */
export interface SeatTaken {
  type: "SeatTaken";
  seat: number;
  name: string;
}
/** The host closed an open seat before the first placement: it takes no part. */
export interface SeatClosed {
  type: "SeatClosed";
  seat: number;
}
/** The host gave the seat a new token: `credential` is its SHA-256 (hex), never the token. */
export interface SeatTokenReissued {
  type: "SeatTokenReissued";
  seat: number;
  credential: string;
}
/** The ended game's next game. */
export interface NextGame {
  type: "NextGame";
  game_id: string;
}
export interface ChairClaimed {
  type: "ChairClaimed";
  seat: number;
  space: string;
  token: Token;
  bonus: Amounts;
  doubled?: boolean;
}
export interface ChairStolen {
  type: "ChairStolen";
  seat: number;
  space: string;
  token: Token;
  bonus: Amounts;
  from_seat: number;
  reason: "instrument" | "majority";
  doubled?: boolean;
}
export interface PlacedBelowLine {
  type: "PlacedBelowLine";
  seat: number;
  space: string;
  token: Token;
  consolation: Amounts;
  reason: "instrument_holds" | "no_majority" | "own_chair";
}
export interface GameEnded {
  type: "GameEnded";
  seat: number;
  scores: Score[];
  ranking: Rank[];
}
/** `seat` took back its placement of `version` (always the event just before): the game is again as it
 * was before that placement. */
export interface PlacementTakenBack {
  type: "PlacementTakenBack";
  seat: number;
  version: number;
}
export type GameEvent =
  | GameCreated
  | ChairClaimed
  | ChairStolen
  | PlacedBelowLine
  | GameEnded
  | PlacementTakenBack
  | SeatTaken
  | SeatClosed
  | SeatTokenReissued
  | NextGame;

export interface Envelope {
  game_id: string;
  version: number;
  /** Server time, UTC, ISO 8601 with milliseconds and Z. */
  at: string;
  command_id: string | null;
  seat: number | null;
  event: GameEvent;
  schema: number;
  /** SHA-256 (hex) of the previous envelope's body (the envelope without its `proof`; for an envelope
   * signed alone, its whole line); 64 zeros for GameCreated's. */
  prev: string;
  /** The id of the key that signed it (absent or null before signing). */
  key?: string | null;
  /** The envelope's own signature (base64), in envelopes signed one at a time before batches. */
  sig?: string | null;
  /** Where the envelope stands in the batch its key signed, and that batch's signed checkpoint. */
  proof?: Proof | null;
}
/** An envelope's inclusion proof (docs/protocol.md section 7): its leaf's `index` among `size` leaves,
 * the sibling hashes from the leaf up (hex), and the checkpoint: the tree's `root` (hex), its time and the
 * key's Ed25519 signature of the checkpoint text (base64). */
export interface Proof {
  index: number;
  size: number;
  path: string[];
  root: string;
  at: string;
  sig: string;
}

// Frames ------------------------------------------------------------------------------------------------

export interface Hello {
  type: "hello";
  token?: string | null;
  since?: number | null;
  view?: ViewMode;
}
export interface PlaceFrame {
  type: "place";
  /** `[A-Za-z0-9._:-]{1,64}`, chosen by the client. */
  id: string;
  token: Token;
  space: string;
  /** 1..10 (1); 6 or more doubles an instrument's chair bonus. */
  skill?: number;
  consolation?: Consolation;
  /** Rare Strings only: 1 material (2 when doubled). */
  materials?: Material[] | null;
  expected_version?: number | null;
}
export interface EndGameFrame {
  type: "end_game";
  id: string;
  expected_version?: number | null;
}
/** Take back the sender's own placement while it is the game's last event. */
export interface TakeBackFrame {
  type: "take_back";
  id: string;
  expected_version?: number | null;
}
/** Name oneself in the open seat of the connection's token (a seat with a name: `seat_taken`). */
export interface TakeSeatFrame {
  type: "take_seat";
  id: string;
  /** At most 128 characters. */
  name: string;
}
/** Start the ended game's next game, or get it once started (`game_not_over` before the end). */
export interface PlayAgainFrame {
  type: "play_again";
  id: string;
}
export type ClientFrame = Hello | PlaceFrame | EndGameFrame | TakeBackFrame | TakeSeatFrame | PlayAgainFrame;
/** What place() takes: a place frame's fields; the id is made when it is missing. */
export type PlaceFields = Omit<PlaceFrame, "type" | "id"> & { id?: string };
/** What endGame() takes. */
export type EndGameFields = Omit<EndGameFrame, "type" | "id"> & { id?: string };
/** What takeBack() takes. */
export type TakeBackFields = Omit<TakeBackFrame, "type" | "id"> & { id?: string };
/** What takeSeat() takes besides the name. */
export type TakeSeatFields = { id?: string };
/** What playAgain() takes. */
export type PlayAgainFields = { id?: string };

export interface Welcome {
  type: "welcome";
  role: Role;
  seat: number | null;
  version: number;
  view: View;
}
export interface Accepted {
  type: "accepted";
  id: string;
  version: number;
  events: Envelope[];
}
/** The codes of `rejected` frames (server/protocol/codes.py's CODES). */
export type RejectionCode =
  | "too_large"
  | "rate_limited"
  | "bad_request"
  | "forbidden"
  | "unknown_game"
  | "game_over"
  | "stale_version"
  | "limit_reached"
  | "table_not_full"
  | "seat_taken"
  | "seat_closed"
  | "game_started"
  | "game_not_over"
  | "next_game_exists"
  | "illegal_space"
  | "cannot_take_back"
  | "missing_choice"
  | "unavailable"
  | "store_full"
  | "damaged_game"
  | "archiving"
  | "history_lost";
/** The codes of HTTP errors: those, and the ones only HTTP carries (HTTP_ONLY). */
export type HttpErrorCode =
  | RejectionCode
  | "too_many_games"
  | "no_open_seat"
  | "unknown_parameter"
  | "bad_date"
  | "bad_limit"
  | "bad_cursor"
  | "bad_name"
  | "unknown_player";
export interface RejectedFrame {
  type: "rejected";
  id: string | null;
  code: RejectionCode;
  message: string;
  version: number;
}
/** Live envelopes with the whole view after them (`view: "full"`). */
export interface EventsFrame {
  type: "events";
  envelopes: Envelope[];
  view: View;
  view_delta?: never;
}
/** Live envelopes with what they changed in the view (`view: "delta"`, the default). */
export interface DeltaFrame {
  type: "events";
  envelopes: Envelope[];
  view_delta: ViewDelta;
  view?: never;
}
/** Envelopes without a view: the history after a welcome, or live for `view: false`. */
export interface HistoryFrame {
  type: "events";
  envelopes: Envelope[];
  view?: never;
  view_delta?: never;
}
export type AnyEventsFrame = EventsFrame | DeltaFrame | HistoryFrame;
export interface SeatPresence {
  seat: number;
  /** At least one connection of this seat is open, on any node. */
  online: boolean;
}
/** Who is at the table now, on every node (never part of the game's events or view). */
export interface Presence {
  /** Every seat, in seat order. */
  seats: SeatPresence[];
  /** Spectator connections. */
  spectators: number;
}
/** Sent after the welcome, then whenever presence changes (at most one a second per game). */
export interface PresenceFrame {
  type: "presence";
  seats: SeatPresence[];
  spectators: number;
}
/** The ended game's next game has started: `token`, the one this connection came with, does the same
 * there (none for a public spectator). */
export interface NextGameFrame {
  type: "next_game";
  game_id: string;
  token?: string;
}
export type ServerFrame =
  | Welcome
  | Accepted
  | RejectedFrame
  | EventsFrame
  | DeltaFrame
  | HistoryFrame
  | PresenceFrame
  | NextGameFrame;

// The wall feed (GET /wall/ws) ---------------------------------------------------------------------------

/** A game on the wall, whole. */
export interface WallGame {
  game_id: string;
  players: string[];
  layout: Layout;
  version: number;
  ended: boolean;
  /** Each space's First Chair holders: a standard space's holder ([] when empty), a rare space's, oldest
   * first. */
  chairs: { [space: string]: number[] };
  /** Each seat's prestige, in seat order. */
  prestige: number[];
  /** Who is at the table now. */
  presence: Presence;
}
/** What changed in a game on the wall: only the changed fields; of `chairs`, only the spaces whose
 * holders changed. */
export interface WallChange {
  game_id: string;
  version?: number;
  ended?: boolean;
  chairs?: { [space: string]: number[] };
  prestige?: number[];
  presence?: Presence;
  /** Whole, when an open seat was taken (null: a seat still open). */
  players?: (string | null)[];
}
/** The feed's first frame: its first page, the most active games on the wall (live ones first, then
 * ended, most recently ended first). */
export interface WallFrame {
  type: "wall";
  games: WallGame[];
  /** How many ended games the wall keeps. */
  ended_kept: number;
  /** How many games the wall shows in all. */
  total: number;
}
/** What changed since the frame before, of the games held; no game is in two lists. */
export interface WallChangesFrame {
  type: "wall_changes";
  retired: string[];
  /** Games added to those held: they go before them. */
  added: WallGame[];
  changed: WallChange[];
  total: number;
}
/** The answer to `wall_more`: the next games not held (none when every one is); they go after those held. */
export interface WallPageFrame {
  type: "wall_page";
  games: WallGame[];
  total: number;
}
/** The one frame a client sends the feed: another page. */
export interface WallMore {
  type: "wall_more";
}
export type WallFeedFrame = WallFrame | WallChangesFrame | WallPageFrame | WallMore;

// HTTP answers ------------------------------------------------------------------------------------------

export interface SeatToken {
  seat: number;
  /** null: an open seat. */
  name: string | null;
  /** Secret; shown in this answer only. */
  token: string;
}
export interface CreatedGame {
  game_id: string;
  version: number;
  seats: SeatToken[];
  /** The host's token: reissues seat tokens, closes open seats, starts the next game; watches. */
  host_token: string;
  /** A private game's spectator token. */
  watch_token?: string;
}
/** An open table with a seat left (GET /games/open). */
export interface OpenTable {
  game_id: string;
  players: (string | null)[];
  open_seats: number[];
  version: number;
}
export interface GameSummary {
  game_id: string;
  players: string[];
  version: number;
  ended: boolean;
  presence: Presence;
}
/** GET /games/{id} without `at`: the view now, and beside its fields the presence now (and an ended
 * game's next game, once it has one). */
export type Game = View & { presence: Presence; next_game?: string };
export interface LegalSpaces {
  /** The spaces where the token may go, in layout order. */
  spaces: string[];
  /** For each of them where a placement must name materials, how many. */
  materials: { [space: string]: number };
}
export interface HttpError {
  code: HttpErrorCode;
  message: string;
  game_id?: string;
  version?: number;
}

// The library -----------------------------------------------------------------------------------------

/** Client-side codes, besides the wire's: the connection ended for good, no answer in time, no server. */
export type ClientCode = "closed" | "timeout" | "unreachable";

export class OrchestraError extends Error {
  constructor(code: string, message: string, details?: object);
  readonly name: "OrchestraError";
  /** The wire code (`illegal_space`...), `http_<status>` for an HTTP error without one, or a ClientCode. */
  readonly code: HttpErrorCode | ClientCode | `http_${number}`;
  /** The HTTP status of an HTTP refusal. */
  readonly status: number | null;
  readonly body: HttpError | null;
  /** The `rejected` frame of a websocket refusal. */
  readonly frame: RejectedFrame | null;
  /** The game's version when it refused a command. */
  readonly version: number | null;
  /** The close code, when the socket closed (1008, 1011, 1013...). */
  readonly closeCode: number | null;
  readonly closeReason: string | null;
}

export class DeltaMismatch extends Error {
  readonly name: "DeltaMismatch";
}

/** An id in words: "percussion_keyboards" -> "Percussion & Keyboards". */
export function nameOf(id: string): string;
/** "a Classical performance", "an Oboe instrument"; short: "Classical perf.", "Oboe". */
export function describeToken(token: Token, options?: { short?: boolean }): string;

/** The view after a delta (a new object); throws DeltaMismatch when it does not apply to `view`. */
export function applyDelta(view: View, delta: ViewDelta): View;

/** What fetches: the global `fetch` unless one is given. */
export type Fetch = (url: string, init: { method: string; headers: Record<string, string>; body?: string; cache?: string }) => Promise<{
  ok: boolean;
  status: number;
  json(): Promise<any>;
  text(): Promise<string>;
}>;

export function createGame(
  baseUrl: string,
  options: {
    /** null: an open seat. */
    players: (string | null)[];
    layout?: string;
    private?: boolean;
    /** An open table: anyone may join (public games only). */
    open?: boolean;
    apiKey?: string;
    fetch?: Fetch;
  },
): Promise<CreatedGame>;
export function openTables(baseUrl: string, options?: { fetch?: Fetch }): Promise<OpenTable[]>;
export function joinGame(
  baseUrl: string,
  gameId: string,
  name: string,
  options?: { fetch?: Fetch },
): Promise<{ seat: number; token: string }>;
export function reissueToken(
  baseUrl: string,
  gameId: string,
  seat: number,
  hostToken: string,
  options?: { fetch?: Fetch },
): Promise<string>;
export function closeSeat(
  baseUrl: string,
  gameId: string,
  seat: number,
  hostToken: string,
  options?: { fetch?: Fetch },
): Promise<{ seat: number; version: number }>;
export function nextGame(baseUrl: string, gameId: string, hostToken: string, options?: { fetch?: Fetch }): Promise<string>;
export function listGames(baseUrl: string, options?: { limit?: number; fetch?: Fetch }): Promise<GameSummary[]>;
/** A seat of an ended game in the club records (`rank` null: a closed seat). */
export interface RecordSeat {
  seat: number;
  name: string | null;
  prestige: number;
  rank: number | null;
}
/** An ended game in the club records. */
export interface RecordGame {
  game_id: string;
  layout: string;
  created_at: string;
  ended_at: string;
  placements: number;
  version: number;
  players: RecordSeat[];
  replay: string;
}
/** A player's record across ended games. */
export interface PlayerRecord {
  name: string;
  games: number;
  wins: number;
  average_prestige: number;
  best_prestige: number;
  last_played: string;
}
export function recordGames(
  baseUrl: string,
  options?: {
    player?: string;
    since?: string;
    until?: string;
    layout?: string;
    limit?: number;
    after?: string;
    game?: string;
    token?: string | null;
    fetch?: Fetch;
  },
): Promise<{ games: RecordGame[]; next: string | null }>;
export function recordPlayer(baseUrl: string, name: string, options?: { fetch?: Fetch }): Promise<PlayerRecord>;
export function recordStandings(
  baseUrl: string,
  options?: { since?: string; until?: string; fetch?: Fetch },
): Promise<{ standings: Array<PlayerRecord & { place: number }> }>;
export function getView(
  baseUrl: string,
  gameId: string,
  options?: { at?: number; token?: string | null; fetch?: Fetch },
): Promise<View>;
/** GET /games/{id}'s `presence`: who is at the table now. */
export function getPresence(baseUrl: string, gameId: string, options?: { token?: string | null; fetch?: Fetch }): Promise<Presence>;
export function getEvents(
  baseUrl: string,
  gameId: string,
  options?: { after?: number; token?: string | null; fetch?: Fetch },
): Promise<Envelope[]>;
export function getLegal(
  baseUrl: string,
  gameId: string,
  placed: Token,
  options?: { skill?: number; token?: string | null; fetch?: Fetch },
): Promise<LegalSpaces>;

/** One key of GET /signing-keys: its id, its raw 32-byte Ed25519 public key (base64), whether it signs
 * now, and its period (a retired key vouches only for envelopes dated before `retired_at`). */
export interface SigningKey {
  id: string;
  public_key: string;
  status: "current" | "retired";
  made_at?: string | null;
  retired_at?: string | null;
}
/** GET /signing-keys: the current key's id, and every key, the current one first. */
export interface SigningKeys {
  current: string | null;
  keys: SigningKey[];
}
export function getSigningKeys(baseUrl: string, options?: { fetch?: Fetch }): Promise<SigningKeys>;
/** What verifyEnvelope found: the envelope is as the key wrote it, or why not, in words. */
export type Verification = { ok: true } | { ok: false; problem: string };
/** Check that a key of `keys` wrote `envelope` (as received: parsed, unchanged) as it is: its proof's
 * inclusion path from its body to the checkpoint's root, and the checkpoint's Ed25519 signature (each
 * checkpoint checked once per keys object); an envelope signed alone, against its own signature.
 * Rejects only where the runtime's WebCrypto has no Ed25519. */
export function verifyEnvelope(
  envelope: Envelope,
  keys: SigningKeys | readonly SigningKey[],
): Promise<Verification>;

/** The part of a WebSocket the client uses: the browser's, Node 22's global one, or the `ws` package's. */
export interface WebSocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: "open" | "error", listener: (event: any) => void): void;
  addEventListener(type: "message", listener: (event: { data: any }) => void): void;
  addEventListener(type: "close", listener: (event: { code: number; reason: string }) => void): void;
}
export type WebSocketConstructor = new (url: string) => WebSocketLike;

export interface ConnectOptions {
  /** A seat token (a player), a private game's watch token, or none (a spectator of a public game). */
  token?: string | null;
  /** The last version you hold: the envelopes after it follow the welcome (0: the whole history). */
  since?: number | null;
  view?: ViewMode;
  /** Where there is no global WebSocket (Node 20): e.g. `WebSocket` from the `ws` package. */
  WebSocket?: WebSocketConstructor;
  /** Resume after a drop, 1012 or 1013 (true). */
  reconnect?: boolean;
  /** Milliseconds to wait for the welcome, and for each command's answer (10000). */
  timeout?: number;
  /** Milliseconds of resuming without a welcome before giving up (60000; Infinity: never). */
  resumeFor?: number;
  /** Retry the first connection as a resume is, instead of failing at once (false). */
  waitForServer?: boolean;
}

export interface CloseInfo {
  /** The close code that ended it: 1000 (close()), 1008, 1011, or the last one seen when it gave up. */
  code: number | null;
  reason: string;
  /** The rejection that came with it (a refused hello), if any. */
  frame: RejectedFrame | null;
}

export interface ConnectionEvents {
  /** New envelopes, each once and in version order; `frame` is the `events` frame they came in. */
  events: (envelopes: Envelope[], frame: AnyEventsFrame) => void;
  /** `connection.view` changed (a live frame, a resume's welcome). */
  view: (view: View) => void;
  /** A resume's welcome. */
  welcome: (frame: Welcome) => void;
  /** `connection.presence` changed: a presence frame (one follows each welcome). */
  presence: (presence: Presence) => void;
  /** The ended game's next game started (or was, before this connection joined). */
  next_game: (next: { game_id: string; token?: string }) => void;
  /** A rejection that answers no pending command (`id: null`). */
  rejected: (frame: RejectedFrame) => void;
  /** The socket closed or was given up; resuming. */
  reconnecting: (info: { code: number | null; reason: string }) => void;
  /** The connection ended for good. */
  close: (info: CloseInfo) => void;
}

export class Connection {
  /** Made by connect(). */
  private constructor(baseUrl: string, gameId: string, options?: ConnectOptions);
  readonly gameId: string;
  readonly url: string;
  readonly role: Role;
  /** The seat of a player; null for a spectator. */
  readonly seat: number | null;
  /** The highest envelope version delivered; a resume asks for what follows it. */
  readonly version: number;
  /** The view, kept current; with `view: false`, the welcome's. */
  readonly view: View;
  readonly welcome: Welcome;
  /** Who is at the table, from the last presence frame; null before the first. */
  readonly presence: Presence | null;
  /** The ended game's next game, once a next_game frame named it; null before. */
  readonly nextGame: { game_id: string; token?: string } | null;
  readonly reconnects: number;
  /** The last envelope delivered; null before the first. */
  readonly lastEnvelope: Envelope | null;
  /** This seat's placement when it is the last envelope delivered and the game has not ended, else null:
   * when a take-back may be offered (the server still decides). Known once an envelope has been
   * delivered (connect with `since` to know it from the start). */
  readonly lastPlacement: (Envelope & { event: ChairClaimed | ChairStolen | PlacedBelowLine }) | null;
  /** Resolves when the connection has ended for good. */
  readonly closed: Promise<CloseInfo>;
  on<K extends keyof ConnectionEvents>(name: K, listener: ConnectionEvents[K]): () => void;
  off<K extends keyof ConnectionEvents>(name: K, listener: ConnectionEvents[K]): void;
  /** Resolves to the `accepted` frame once its envelopes have been delivered (`view` and `version` hold
   * them); rejects with an OrchestraError (its `code`: the wire's). */
  place(placement: PlaceFields, options?: { timeout?: number }): Promise<Accepted>;
  endGame(fields?: EndGameFields, options?: { timeout?: number }): Promise<Accepted>;
  /** Take back this seat's placement while it is the game's last event; otherwise rejects with
   * `cannot_take_back` (`game_over` after the end). */
  takeBack(fields?: TakeBackFields, options?: { timeout?: number }): Promise<Accepted>;
  /** Name this connection's open seat; rejects with `seat_taken` when it has a name. */
  takeSeat(name: string, fields?: TakeSeatFields, options?: { timeout?: number }): Promise<Accepted>;
  /** Start the ended game's next game or get it (`game_not_over` before the end). */
  playAgain(fields?: PlayAgainFields, options?: { timeout?: number }): Promise<Accepted>;
  /** Any command frame (place(), takeBack() and endGame() say it shorter). */
  send(
    command:
      | (PlaceFields & { type: "place" })
      | (EndGameFields & { type: "end_game" })
      | (TakeBackFields & { type: "take_back" })
      | (TakeSeatFields & { type: "take_seat"; name: string })
      | (PlayAgainFields & { type: "play_again" }),
    options?: { timeout?: number },
  ): Promise<Accepted>;
  close(): Promise<CloseInfo>;
}

export function connect(baseUrl: string, gameId: string, options?: ConnectOptions): Promise<Connection>;

/** The games after a `wall_changes` frame (a new Map, in the wall's order; `games` is left as it was). */
export function applyWallChanges(games: Map<string, WallGame>, frame: WallChangesFrame): Map<string, WallGame>;

export interface WallOptions {
  WebSocket?: WebSocketConstructor;
  /** Connect again after a drop, 1012 or 1013 (true); the new `wall` frame replaces `games`. */
  reconnect?: boolean;
  /** Milliseconds to wait for the `wall` frame (10000). */
  timeout?: number;
  /** Milliseconds of reconnecting without a `wall` frame before giving up (60000; Infinity: never). */
  resumeFor?: number;
  /** Retry the first connection as a reconnect is, instead of failing at once (false). */
  waitForServer?: boolean;
}

export interface WallEvents {
  /** A `wall` frame after a reconnect: `games` replaced whole. */
  wall: (games: Map<string, WallGame>) => void;
  /** A `wall_changes` frame, applied to `games`. */
  changes: (changes: { added: WallGame[]; changed: WallChange[]; retired: string[] }, frame: WallChangesFrame) => void;
  /** A `wall_page` frame (the answer to more()): its games added after those held. */
  page: (games: WallGame[], frame: WallPageFrame) => void;
  reconnecting: (info: { code: number | null; reason: string }) => void;
  /** The connection ended for good: close(), 1008, or given up. */
  close: (info: { code: number | null; reason: string }) => void;
}

export class WallConnection {
  /** Made by connectWall(). */
  private constructor(baseUrl: string, options?: WallOptions);
  readonly url: string;
  /** The games held, by id: the first page (the most active), those added since and the pages asked
   * for; live games first, then the ended ones, most recently ended first. */
  readonly games: Map<string, WallGame>;
  readonly endedKept: number;
  /** How many games the wall shows in all (`games` holds a page of them, more() asks for another). */
  readonly total: number;
  readonly reconnects: number;
  readonly closed: Promise<{ code: number | null; reason: string }>;
  /** Ask for another page; false when the connection is not open. */
  more(): boolean;
  on<K extends keyof WallEvents>(name: K, listener: WallEvents[K]): () => void;
  off<K extends keyof WallEvents>(name: K, listener: WallEvents[K]): void;
  close(): Promise<{ code: number | null; reason: string }>;
}

/** Follow the wall feed: resolves at its first `wall` frame. */
export function connectWall(baseUrl: string, options?: WallOptions): Promise<WallConnection>;
