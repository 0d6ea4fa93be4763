// The HTTP calls and the pure helpers, against a live server.

import assert from "node:assert/strict";
import { test } from "node:test";

import {
  applyDelta,
  createGame,
  DeltaMismatch,
  describeToken,
  getEvents,
  getLegal,
  getView,
  listGames,
  nameOf,
  OrchestraError,
} from "../orchestra.js";
import { servers } from "./helpers.js";

test("createGame makes a game with its seats, and a private one with a watch token", async () => {
  const url = servers.main;
  const created = await createGame(url, { players: ["Ada", "Ben"] });
  assert.equal(created.version, 1);
  assert.deepEqual(
    created.seats.map(({ seat, name }) => [seat, name]),
    [
      [0, "Ada"],
      [1, "Ben"],
    ],
  );
  assert.ok(created.seats.every((seat) => typeof seat.token === "string" && seat.token.length > 10));
  assert.equal(created.watch_token, undefined);
  assert.ok((await listGames(url, { limit: 1000 })).some((game) => game.game_id === created.game_id));

  const hidden = await createGame(url, { players: ["Cy"], private: true, layout: "standard" });
  assert.equal(typeof hidden.watch_token, "string");
  assert.ok(!(await listGames(url, { limit: 1000 })).some((game) => game.game_id === hidden.game_id));
  await assert.rejects(getView(url, hidden.game_id), (error) => error.code === "forbidden" && error.status === 403);
  const view = await getView(url, hidden.game_id, { token: hidden.watch_token });
  assert.deepEqual(view.players, [{ seat: 0, name: "Cy" }]);
});

test("createGame rejects with the wire code and the HTTP status", async () => {
  await assert.rejects(createGame(servers.main, { players: ["A", "B", "C", "D", "E"] }), (error) => {
    assert.ok(error instanceof OrchestraError);
    assert.equal(error.code, "bad_request");
    assert.equal(error.status, 400);
    assert.match(error.message, /players/);
    return true;
  });
  await assert.rejects(getView(servers.main, "no-such-game"), { code: "unknown_game", status: 404 });
  await assert.rejects(getView("http://127.0.0.1:9", "g"), { code: "unreachable" });
});

test("getEvents, getView at a version and getLegal read what the server holds", async () => {
  const created = await createGame(servers.main, { players: ["Ada"] });
  const events = await getEvents(servers.main, created.game_id);
  assert.equal(events.length, 1);
  assert.equal(events[0].event.type, "GameCreated");
  assert.equal(events[0].prev, "0".repeat(64));
  assert.deepEqual(await getEvents(servers.main, created.game_id, { after: 1 }), []);
  const view = await getView(servers.main, created.game_id, { at: 1 });
  assert.equal(view.version, 1);
  assert.equal(Object.keys(view.spaces).length, 14);
  const legal = await getLegal(servers.main, created.game_id, { kind: "repair", family: "winds" });
  assert.deepEqual(legal, { spaces: ["oboe", "clarinet", "flute"], materials: {} });
  const rare = await getLegal(servers.main, created.game_id, { kind: "instrument", instrument: "rare_strings" }, { skill: 6 });
  assert.deepEqual(rare, { spaces: ["rare_strings"], materials: { rare_strings: 2 } });
  await assert.rejects(getLegal(servers.main, created.game_id, { kind: "performance", era: "modern" }), {
    code: "bad_request",
  });
});

test("describeToken and nameOf put ids in words", () => {
  assert.equal(describeToken({ kind: "performance", era: "classical" }), "a Classical performance");
  assert.equal(describeToken({ kind: "instrument", instrument: "oboe" }), "an Oboe instrument");
  assert.equal(describeToken({ kind: "repair", family: "percussion_keyboards" }), "a Percussion & Keyboards repair");
  assert.equal(describeToken({ kind: "performance", era: "baroque" }, { short: true }), "Baroque perf.");
  assert.equal(describeToken({ kind: "instrument", instrument: "rare_winds" }, { short: true }), "Rare Winds");
  assert.equal(nameOf("violin_bc"), "Violin Bc");
});

test("applyDelta extends the view it fits and refuses one it does not", () => {
  const seated = (seat) => ({ seat, token: { kind: "performance", era: "classical" } });
  const view = {
    game_id: "g",
    version: 2,
    ended: false,
    players: [
      { seat: 0, name: "Ada" },
      { seat: 1, name: "Ben" },
    ],
    spaces: {
      viola: { kind: "standard", chair: seated(0), below: [] },
      rare_winds: { kind: "rare", chairs: [] },
    },
    scores: [
      { seat: 0, chairs: ["viola"], prestige: 3, resources: { money: 4 } },
      { seat: 1, chairs: [], prestige: 0, resources: {} },
    ],
  };
  const delta = {
    version: 3,
    ended: false,
    spaces: {},
    added: {
      viola: { kind: "standard", chair: seated(1), below_from: 0, below: [seated(0)] },
      rare_winds: { kind: "rare", chairs_from: 0, chairs: [seated(1)] },
    },
    score_changes: [
      { seat: 0, prestige: 0, resources: { money: 4 }, held: { viola: 0 } },
      { seat: 1, prestige: 6, resources: { money: 4 }, held: { viola: 1, rare_winds: 1 } },
    ],
  };
  const after = applyDelta(view, delta);
  assert.equal(after.version, 3);
  assert.deepEqual(after.spaces.viola, { kind: "standard", chair: seated(1), below: [seated(0)] });
  assert.deepEqual(after.spaces.rare_winds.chairs, [seated(1)]);
  assert.deepEqual(after.scores[1].chairs, ["viola", "rare_winds"]);
  assert.deepEqual(after.scores[0].chairs, []);
  assert.equal(view.version, 2, "the view given is left as it was");
  // An addition may start before the end of the list held (a take-back cuts it), never past it.
  const pastTheEnd = { ...delta, added: { viola: { ...delta.added.viola, below_from: 1 } } };
  assert.throws(() => applyDelta(view, pastTheEnd), DeltaMismatch);
  assert.throws(() => applyDelta(view, { ...delta, added: {}, score_changes: [{ ...delta.score_changes[0], seat: 3 }] }), DeltaMismatch);
});
