// verifyEnvelope against a live server's envelopes: as the history, `accepted` and live frames carry them,
// and altered in each way a forger could.

import assert from "node:assert/strict";
import { test } from "node:test";

import { connect, createGame, getEvents, getSigningKeys, verifyEnvelope } from "../orchestra.js";
import { servers, WebSocket } from "./helpers.js";

const PERFORMANCE = { kind: "performance", era: "classical" };
const SPACES = ["viola", "clarinet", "timpani", "violin_bc", "violin_cr"];
// Names whose JSON needs escapes and more than ASCII: the body re-encoded must be the server's bytes.
const NAMES = ['Zoë "la Flûte" \\ Åsa', "李 🎻 O'Brien", "Ünal / <b> & ☃"];
const UTF8 = new TextEncoder();

async function sha256Hex(text) {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", UTF8.encode(text)));
  return Array.from(digest, (byte) => byte.toString(16).padStart(2, "0")).join("");
}

function withoutProof(envelope) {
  const { proof: _proof, ...body } = envelope;
  return body;
}

/** Games of three tricky names each, whose placements are sent together until the server signed a batch
 * of more than one envelope: every envelope each client got, as history, in `accepted` and live. */
async function playedTogether() {
  const url = servers.main;
  const games = [];
  for (let i = 0; i < 6; i++) {
    const created = await createGame(url, { players: NAMES });
    const seats = await Promise.all(
      created.seats.map((seat) => connect(url, created.game_id, { token: seat.token, WebSocket })),
    );
    const live = [];
    seats[1].on("events", (envelopes) => live.push(...envelopes));
    games.push({ id: created.game_id, seats, live, accepted: [] });
  }
  for (let turn = 0; turn < SPACES.length; turn++) {
    await Promise.all(
      games.map(async (game) => {
        const answer = await game.seats[turn % 3].place({ token: PERFORMANCE, space: SPACES[turn] });
        game.accepted.push(...answer.events);
      }),
    );
    const batched = games.some((game) => game.accepted.some((envelope) => envelope.proof.size > 1));
    if (batched && turn >= 2) break;
  }
  for (const game of games) {
    game.history = await getEvents(url, game.id);
    await Promise.all(game.seats.map((seat) => seat.close()));
  }
  return games;
}

let played;
async function games() {
  played ??= playedTogether();
  return played;
}

test("verifyEnvelope holds for a real server's envelopes: history, accepted and live, batches across games", async () => {
  const keys = await getSigningKeys(servers.main);
  assert.equal(keys.keys[0].id, keys.current);
  const all = await games();
  let paths = 0;
  for (const game of all) {
    assert.ok(game.history.length >= 4 && game.live.length >= 3 && game.accepted.length >= 3);
    assert.deepEqual(game.history[0].event.players, NAMES);
    for (const envelope of [...game.history, ...game.accepted, ...game.live]) {
      assert.deepEqual(await verifyEnvelope(envelope, keys), { ok: true }, JSON.stringify(envelope));
      assert.equal(envelope.key, keys.current);
      paths += envelope.proof.path.length;
    }
    // The body re-encoded is the server's: the next envelope's `prev` is its SHA-256.
    for (let i = 1; i < game.history.length; i++) {
      assert.equal(game.history[i].prev, await sha256Hex(JSON.stringify(withoutProof(game.history[i - 1]))));
    }
  }
  assert.ok(paths > 0, "no batch of more than one envelope: the placements were not signed together");
  assert.deepEqual(await verifyEnvelope(all[0].history[1], keys.keys), { ok: true });
});

test("verifyEnvelope names what was altered: the event, the path, the root, the checkpoint, the key", async () => {
  const keys = await getSigningKeys(servers.main);
  const all = await games();
  const batched = all.flatMap((game) => game.history).find((envelope) => envelope.proof.path.length > 0);
  assert.ok(batched, "no envelope with a path");
  const other = all
    .flatMap((game) => game.history)
    .find((envelope) => envelope.proof.root === batched.proof.root && envelope !== batched);
  const copy = () => structuredClone(batched);
  const flip = (hex) => (hex[0] === "0" ? "1" : "0") + hex.slice(1);
  const problem = async (envelope, list = keys) => (await verifyEnvelope(envelope, list)).problem ?? "";

  const moved = copy();
  moved.event.space = "cello";
  assert.match(await problem(moved), /bad signature .*inclusion path does not lead to the signed root/);
  const renamed = structuredClone(all[0].history[0]);
  renamed.event.players[0] = "Mallory";
  assert.match(await problem(renamed), /bad signature/);
  const path = copy();
  path.proof.path[0] = flip(path.proof.path[0]);
  assert.match(await problem(path), /does not lead to the signed root/);
  const short = copy();
  short.proof.path.push("00".repeat(32));
  assert.match(await problem(short), /cannot be one of leaf/);
  const notHex = copy();
  notHex.proof.path[0] = "zz";
  assert.match(await problem(notHex), /not 32 bytes/);
  const index = copy();
  index.proof.index = index.proof.size;
  assert.match(await problem(index), /cannot be one of leaf/);
  const root = copy();
  root.proof.root = flip(root.proof.root);
  assert.match(await problem(root), /does not lead to the signed root/);
  const at = copy();
  at.proof.at = "2020-01-01T00:00:00.000Z";
  assert.match(await problem(at), /bad checkpoint signature/);
  const sig = copy();
  sig.proof.sig = Buffer.from(new Uint8Array(64)).toString("base64");
  assert.match(await problem(sig), /bad checkpoint signature/);
  const unknown = copy();
  unknown.key = "0123456789abcdef";
  assert.match(await problem(unknown), /not one of the trusted keys/);
  assert.match(await problem(batched, []), /not one of the trusted keys/);
  const twice = { ...withoutProof(batched), sig: batched.proof.sig, proof: batched.proof };
  assert.match(await problem(twice), /only field after it/);
  const stripped = copy();
  delete stripped.proof;
  assert.equal(await problem(stripped), "not signed");
  if (other) {
    // Another envelope's proof of the same batch: its checkpoint is genuine, its path is not this body's.
    assert.match(await problem({ ...withoutProof(batched), proof: other.proof }), /does not lead|cannot be one/);
  }
  assert.deepEqual(await verifyEnvelope(batched, keys), { ok: true }); // the copies changed nothing
});

test("verifyEnvelope checks each checkpoint once per keys object", async () => {
  const all = await games();
  const byRoot = new Map();
  for (const envelope of all.flatMap((game) => game.history)) {
    byRoot.set(envelope.proof.root, [...(byRoot.get(envelope.proof.root) ?? []), envelope]);
  }
  const batch = [...byRoot.values()].sort((a, b) => b.length - a.length)[0];
  assert.ok(batch.length > 1);
  const subtle = crypto.subtle;
  const verify = subtle.verify;
  let signatures = 0;
  subtle.verify = function (...args) {
    signatures += 1;
    return verify.apply(this, args);
  };
  try {
    const keys = await getSigningKeys(servers.main);
    for (const envelope of batch) assert.deepEqual(await verifyEnvelope(envelope, keys), { ok: true });
    assert.equal(signatures, 1);
    for (const envelope of batch) await verifyEnvelope(envelope, keys);
    assert.equal(signatures, 1);
    await verifyEnvelope(batch[0], structuredClone(keys));
    assert.equal(signatures, 2);
  } finally {
    subtle.verify = verify;
  }
});

test("verifyEnvelope checks envelopes signed alone, a retired key's dates, and says 'not signed'", async () => {
  // A key of this test signs a real game's envelopes one at a time, as servers did before batches.
  const pair = await crypto.subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"]);
  const raw = new Uint8Array(await crypto.subtle.exportKey("raw", pair.publicKey));
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", raw));
  const id = Array.from(digest.slice(0, 8), (byte) => byte.toString(16).padStart(2, "0")).join("");
  const publicKey = Buffer.from(raw).toString("base64");
  const alone = [];
  for (const envelope of (await games())[0].history) {
    const body = { ...withoutProof(envelope), key: id };
    body.prev = alone.length ? await sha256Hex(JSON.stringify(alone[alone.length - 1])) : "0".repeat(64);
    const signed = UTF8.encode(`orchestra-envelope-v1\n${JSON.stringify(body)}`);
    const signature = new Uint8Array(await crypto.subtle.sign({ name: "Ed25519" }, pair.privateKey, signed));
    alone.push({ ...body, sig: Buffer.from(signature).toString("base64") });
  }
  const keys = { current: id, keys: [{ id, public_key: publicKey, status: "current" }] };
  for (const envelope of alone) assert.deepEqual(await verifyEnvelope(envelope, keys), { ok: true });

  const altered = structuredClone(alone[1]);
  altered.seat = 1;
  assert.match((await verifyEnvelope(altered, keys)).problem, /bad signature/);
  const unsigned = structuredClone(alone[1]);
  delete unsigned.sig;
  delete unsigned.key;
  assert.deepEqual(await verifyEnvelope(unsigned, keys), { ok: false, problem: "not signed" });

  // Retired after the game: it vouches for it; retired before: not.
  const later = [{ id, public_key: publicKey, status: "retired", retired_at: "2999-01-01T00:00:00.000Z" }];
  assert.deepEqual(await verifyEnvelope(alone[1], later), { ok: true });
  const earlier = [{ id, public_key: publicKey, status: "retired", retired_at: "2000-01-01T00:00:00.000Z" }];
  assert.match((await verifyEnvelope(alone[1], earlier)).problem, /not before its retirement/);
});
