// What the server refused, in words a player reads: each wire code (protocol.md, section 8 and the HTTP
// errors) gets a sentence; the server's own message follows it, as it names the rule or the field.

const WORDS = {
  seat_taken: "That seat already has a player.",
  table_not_full: "The game starts once every seat has a player: wait for the open seats to be taken.",
  no_open_seat: "This table has no open seat left.",
  forbidden: "Not allowed here.",
  seat_closed: "The host closed that seat: it takes no part in this game.",
  game_not_over: "The game has not ended yet: play again once it has.",
  game_started: "The game has started: its seats can no longer be closed.",
  game_over: "The game has ended.",
  bad_request: "The server could not take that.",
  rate_limited: "Too many requests from here: wait a moment, then try again.",
  unknown_game: "There is no such game on this server.",
  too_many_games: "The server holds all the games it can: try again once some have ended.",
  unavailable: "The server cannot reach its store just now: try again.",
  store_full: "The server's store is full: no game can be made until its operator makes room.",
  illegal_space: "That token cannot go there.",
  missing_choice: "Name the material(s) first.",
  stale_version: "The game moved on meanwhile: look again.",
  cannot_take_back: "Only your own placement, while it is the last one, can be taken back.",
  limit_reached: "The game holds all the placements it may.",
  too_large: "That is too long.",
  unreachable: "The server cannot be reached: check the connection.",
  timeout: "The server did not answer in time.",
  closed: "The connection to the game has closed.",
};

/** A refusal (an OrchestraError, or `{code, message}`) in words: the sentence of its code, then what the
 * server said. */
export function refusalWords(error) {
  const code = error?.code ?? "error";
  const said = error?.message ? ` (${error.message})` : "";
  return `${WORDS[code] ?? `Refused: ${code}.`}${said}`;
}
