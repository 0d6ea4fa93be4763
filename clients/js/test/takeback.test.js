// Taking back a placement: takeBack(), lastPlacement, and views cut by a take-back's delta, against a live
// server.

import assert from "node:assert/strict";
import { test } from "node:test";

import { applyDelta, connect, createGame, getEvents, getView, OrchestraError } from "../orchestra.js";
import { collect, PERF, placementsOfEveryKind, servers, STRINGS, untilVersion, WebSocket } from "./helpers.js";

test("applyDelta cuts a list where a take-back's addition starts and gives the chair back", () => {
  const seated = (seat, era = "classical") => ({ seat, token: { kind: "performance", era } });
  const view = {
    game_id: "g",
    version: 5,
    ended: false,
    players: [
      { seat: 0, name: "Ada" },
      { seat: 1, name: "Ben" },
    ],
    spaces: {
      viola: { kind: "standard", chair: seated(1), below: [seated(0), seated(1, "baroque"), seated(0, "romantic")] },
      rare_winds: { kind: "rare", chairs: [seated(0), seated(1)] },
    },
    scores: [
      { seat: 0, chairs: ["rare_winds"], prestige: 3, resources: { money: 4 } },
      { seat: 1, chairs: ["viola", "rare_winds"], prestige: 6, resources: { money: 2 } },
    ],
  };
  // Seat 1's steal taken back: its token leaves the chair, Ada's comes back to it from below the line.
  const delta = {
    version: 6,
    ended: false,
    spaces: {},
    added: {
      viola: { kind: "standard", chair: seated(0), below_from: 1, below: [seated(1, "baroque")] },
      rare_winds: { kind: "rare", chairs_from: 1, chairs: [] },
    },
    score_changes: [
      { seat: 0, prestige: 6, resources: { money: 4 }, held: { viola: 1 } },
      { seat: 1, prestige: 0, resources: { money: 2 }, held: { viola: 0, rare_winds: 0 } },
    ],
  };
  const after = applyDelta(view, delta);
  assert.deepEqual(after.spaces.viola, { kind: "standard", chair: seated(0), below: [seated(0), seated(1, "baroque")] });
  assert.deepEqual(after.spaces.rare_winds, { kind: "rare", chairs: [seated(0)] });
  assert.deepEqual(after.scores[0].chairs, ["viola", "rare_winds"]);
  assert.deepEqual(after.scores[1].chairs, []);
  assert.equal(view.spaces.viola.below.length, 3, "the view given is left as it was");
  // Cut to nothing, appending nothing: an empty list.
  const emptied = applyDelta(view, { ...delta, added: { rare_winds: { kind: "rare", chairs_from: 0, chairs: [] } }, score_changes: [] });
  assert.deepEqual(emptied.spaces.rare_winds.chairs, []);
});

// A placement of every kind (a claim, below the line for each reason, steals by majority and by an
// instrument, a rare chair with materials), each taken back once and then placed again.
const script = placementsOfEveryKind;

function lengths(view) {
  return Object.fromEntries(
    Object.entries(view.spaces).map(([id, space]) => [id, space.kind === "rare" ? space.chairs.length : space.below.length]),
  );
}

test("takeBack: the game as before the placement, every view equals GET /games/{id}, lastPlacement follows", async () => {
  const url = servers.main;
  const created = await createGame(url, { players: ["Ada", "Ben", "Cy"] });
  const gameId = created.game_id;
  const seats = [
    await connect(url, gameId, { token: created.seats[0].token, WebSocket }),
    await connect(url, gameId, { token: created.seats[1].token, WebSocket, view: "full" }),
    await connect(url, gameId, { token: created.seats[2].token, WebSocket }),
  ];
  const watcher = await connect(url, gameId, { WebSocket, since: 0 });
  const seen = collect(watcher);
  const frames = [];
  watcher.on("events", (_, frame) => frames.push(frame));
  const full = await connect(url, gameId, { WebSocket, view: "full" });
  const all = [...seats, watcher, full];
  const cuts = [];
  const sameAsServer = async (version, what) => {
    const expected = await getView(url, gameId);
    assert.equal(expected.version, version);
    for (const connection of all) {
      await untilVersion(connection, version);
      assert.deepEqual(connection.view, expected, `${what}: ${connection.role} ${connection.seat} at ${version}`);
    }
    return expected;
  };
  try {
    for (const connection of all) assert.equal(connection.lastPlacement, null, "nothing placed yet");
    for (const [player, placement] of script(seats)) {
      const before = await getView(url, gameId);
      const placed = await player.place(placement);
      const what = placed.events[0].event.type;
      await sameAsServer(placed.version, what);
      const held = lengths(watcher.view);
      assert.deepEqual(player.lastPlacement, placed.events[0], `${what}: offered to its player`);
      for (const other of all) if (other !== player) assert.equal(other.lastPlacement, null, `${what}: to no one else`);

      const back = await player.takeBack({ expected_version: placed.version });
      assert.equal(back.version, placed.version + 1);
      assert.deepEqual(back.events[0].event, { type: "PlacementTakenBack", seat: player.seat, version: placed.version });
      const after = await sameAsServer(back.version, `${what} taken back`);
      assert.deepEqual(after, { ...before, version: back.version }, `${what}: taken back, the view is the one before it`);
      for (const connection of all) assert.equal(connection.lastPlacement, null, `${what}: its take-back ends the offer`);
      // The take-back's frame: a delta cutting the list the placement added to (if it added to one).
      const frame = frames.at(-1);
      assert.equal(frame.envelopes.at(-1).event.type, "PlacementTakenBack");
      for (const [id, addition] of Object.entries(frame.view_delta.added)) {
        const from = addition.kind === "rare" ? addition.chairs_from : addition.below_from;
        assert.ok(from <= held[id], `${what}: ${id} starts within the list held`);
        if (from < held[id]) cuts.push(`${what} ${id}`);
      }
      await assert.rejects(player.takeBack(), { code: "cannot_take_back" }, "a take-back is not taken back");

      const again = await player.place(placement);
      assert.equal(again.events[0].event.type, what, "placed again, decided as the first time");
      await sameAsServer(again.version, `${what} again`);
    }
    // Below the line, and a rare space's chairs: each cut at least once.
    assert.ok(cuts.includes("PlacedBelowLine viola"), `cuts: ${cuts}`);
    assert.ok(cuts.includes("ChairClaimed rare_strings"), `cuts: ${cuts}`);

    // A connection that reads the history knows at once that its placement is the last one.
    const [ada] = seats;
    const last = await ada.place({ token: { kind: "repair", family: "winds" }, space: "oboe" });
    const later = await connect(url, gameId, { token: created.seats[0].token, WebSocket, since: 0 });
    all.push(later);
    await untilVersion(later, last.version);
    assert.equal(later.lastPlacement?.version, last.version);
    await later.takeBack();
    assert.equal(later.lastPlacement, null);
    await untilVersion(ada, last.version + 1);
    assert.equal(ada.lastPlacement, null);

    const fresh = await connect(url, gameId, { WebSocket });
    all.push(fresh);
    assert.deepEqual(fresh.view, await sameAsServer(last.version + 1, "the end"), "a welcome's whole view agrees");
    assert.equal(fresh.lastPlacement, null, "a spectator is never offered one");
    await untilVersion(watcher, last.version + 1);
    assert.deepEqual(seen, await getEvents(url, gameId), "the history holds each placement and its take-back");
  } finally {
    await Promise.all(all.map((connection) => connection.close()));
  }
});

test("takeBack is refused with the wire code: cannot_take_back, forbidden, stale_version, game_over", async () => {
  const url = servers.main;
  const created = await createGame(url, { players: ["Ada", "Ben"] });
  const [ada, ben] = await Promise.all(created.seats.map(({ token }) => connect(url, created.game_id, { token, WebSocket })));
  const watcher = await connect(url, created.game_id, { WebSocket });
  const refused = async (promise, code, version) => {
    await assert.rejects(promise, (error) => {
      assert.ok(error instanceof OrchestraError);
      assert.deepEqual([error.code, error.frame.type], [code, "rejected"]);
      if (version !== undefined) assert.equal(error.version, version);
      return true;
    });
  };
  try {
    await refused(ada.takeBack(), "cannot_take_back", 1); // nothing placed yet
    await ada.place({ token: PERF, space: "viola" });
    await refused(ben.takeBack(), "cannot_take_back", 2); // Ada's placement, not Ben's
    await refused(watcher.takeBack(), "forbidden");
    await refused(ada.takeBack({ expected_version: 1 }), "stale_version", 2);
    const back = await ada.takeBack({ id: "ada-back" });
    assert.deepEqual(await ada.takeBack({ id: "ada-back" }), back, "an id is answered once");
    await untilVersion(ada, 3);
    await ben.place({ token: STRINGS, space: "cello" });
    assert.equal(ben.lastPlacement?.version, 4);
    await untilVersion(ada, 4);
    assert.equal(ada.lastPlacement, null);
    await ada.endGame();
    await untilVersion(ben, 5);
    assert.equal(ben.lastPlacement, null, "the game has ended");
    await refused(ben.takeBack(), "game_over", 5);
  } finally {
    await Promise.all([ada.close(), ben.close(), watcher.close()]);
  }
});
