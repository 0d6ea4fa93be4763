// The same play as play.js, typed: tsc --noEmit checks it against the declarations the package's
// `exports` name (under `nodenext` and `bundler` resolution), then the test compiles and runs it.

import {
  connect,
  createGame,
  OrchestraError,
  type Accepted,
  type Connection,
  type CreatedGame,
  type Envelope,
  type Token,
  type WebSocketConstructor,
} from "orchestra-game-client";
import { WebSocket as NodeWebSocket } from "ws";

const WebSocket: WebSocketConstructor = NodeWebSocket;
const url: string = process.argv[2] ?? "http://127.0.0.1:8000";

const game: CreatedGame = await createGame(url, { players: ["Ada", "Ben"] });
const seat = game.seats[0];
if (seat === undefined) throw new Error("a game of two players has a first seat");
const ada: Connection = await connect(url, game.game_id, { token: seat.token, WebSocket });
const saw: Envelope[] = [];
const off: () => void = ada.on("events", (envelopes) => saw.push(...envelopes));

const classical: Token = { kind: "performance", era: "classical" };
// @ts-expect-error: an era the rules do not have (the declarations are in force, not `any`)
const modern: Token = { kind: "performance", era: "modern" };
void modern;

const accepted: Accepted = await ada.place({ token: classical, space: "viola" });
let refused: string | null = null;
try {
  await ada.place({ token: { kind: "repair", family: "winds" }, space: "viola" });
} catch (error) {
  if (error instanceof OrchestraError) refused = error.code;
}
off();
console.log(JSON.stringify({ game_id: game.game_id, accepted, saw, refused, version: ada.version }));
await ada.close();
