// Helpers of the Node tests: the servers tests/js/test_js_client.py started, a TCP proxy that drops
// connections as a network would, and a WebSocket that records how each socket closed.

import net from "node:net";
import { WebSocket as NodeWebSocket } from "ws";

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run these tests through tests/js/test_js_client.py`);
  return value;
}

/** The servers: `main` (default settings), `small` (2 connections a game, wall pages of 2), `restartable` (restarted on
 * POST control/restart), `wall` (a Redis of its own, whose wall the test address may fill), and the control
 * endpoint of the pytest that started them. */
export const servers = {
  get main() {
    return required("ORCHESTRA_TEST_URL");
  },
  get small() {
    return required("ORCHESTRA_TEST_SMALL_URL");
  },
  get restartable() {
    return required("ORCHESTRA_TEST_RESTARTABLE_URL");
  },
  get wall() {
    return required("ORCHESTRA_TEST_WALL_URL");
  },
  get control() {
    return required("ORCHESTRA_TEST_CONTROL_URL");
  },
};

/** Ask the pytest that started the servers to do something (restart, damage); resolves when done. */
export async function control(action, query = {}) {
  const url = new URL(action, `${servers.control}/`);
  for (const [key, value] of Object.entries(query)) url.searchParams.set(key, String(value));
  const response = await fetch(url, { method: "POST" });
  if (!response.ok) throw new Error(`control ${action}: ${response.status} ${await response.text()}`);
}

/** The global WebSocket where Node has one (22+), else the ws package's. */
export const WebSocket = globalThis.WebSocket ?? NodeWebSocket;

/** A WebSocket constructor whose sockets note their close codes in `closes`. */
export function recordingWebSocket() {
  const closes = [];
  class Recording extends WebSocket {
    constructor(url) {
      super(url);
      this.addEventListener("close", (event) => closes.push(event.code));
    }
  }
  return { WebSocket: Recording, closes };
}

/** A TCP proxy to `target` (a base URL): `url` goes through it; `drop()` cuts every connection through
 * it at once (no close frame: the peers see the network go), `refuse` turns new connections away. */
export async function startProxy(target) {
  const { hostname, port } = new URL(target);
  const pairs = new Set();
  const proxy = {
    url: "",
    refuse: false,
    connections: 0,
    drop() {
      for (const [a, b] of pairs) {
        a.destroy();
        b.destroy();
      }
      pairs.clear();
    },
    close() {
      proxy.drop();
      return new Promise((resolve) => server.close(resolve));
    },
  };
  const server = net.createServer((incoming) => {
    proxy.connections += 1;
    if (proxy.refuse) {
      incoming.destroy();
      return;
    }
    const outgoing = net.connect(Number(port), hostname);
    const pair = [incoming, outgoing];
    pairs.add(pair);
    const end = () => {
      pairs.delete(pair);
      incoming.destroy();
      outgoing.destroy();
    };
    incoming.on("error", end).on("close", end);
    outgoing.on("error", end).on("close", end);
    incoming.pipe(outgoing);
    outgoing.pipe(incoming);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  proxy.url = `http://127.0.0.1:${server.address().port}`;
  return proxy;
}

/** Resolves once `connection` has delivered the envelopes up to `version`. */
export function untilVersion(connection, version, timeout = 10000) {
  if (connection.version >= version) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      off();
      reject(new Error(`version ${version} not reached (at ${connection.version})`));
    }, timeout);
    const off = connection.on("events", () => {
      if (connection.version < version) return;
      clearTimeout(timer);
      off();
      resolve();
    });
  });
}

/** Resolves once `predicate()` holds (polled). */
export async function until(predicate, what, timeout = 10000) {
  const deadline = Date.now() + timeout;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Every envelope `connection` delivers, in order. */
export function collect(connection) {
  const seen = [];
  connection.on("events", (envelopes) => seen.push(...envelopes));
  return seen;
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export const PERF = { kind: "performance", era: "classical" };
export const STRINGS = { kind: "repair", family: "strings" };
export const VIOLA = { kind: "instrument", instrument: "viola" };
export const RARE_STRINGS = { kind: "instrument", instrument: "rare_strings" };
export const RARE_WINDS = { kind: "instrument", instrument: "rare_winds" };

// A placement of every kind for three seats, in order: a claim, below the line for each reason, steals
// by majority and by an instrument (doubled), a rare chair with materials, with and without doubling.
export function placementsOfEveryKind([ada, ben, cy]) {
  return [
    [ada, { token: PERF, space: "viola" }],
    [ben, { token: STRINGS, space: "viola" }],
    [ben, { token: PERF, space: "viola", consolation: "inspiration" }],
    [ada, { token: STRINGS, space: "viola" }],
    [cy, { token: VIOLA, space: "viola", skill: 6 }],
    [ben, { token: PERF, space: "viola" }],
    [cy, { token: RARE_STRINGS, space: "rare_strings", materials: ["wood"] }],
    [ada, { token: RARE_STRINGS, space: "rare_strings", skill: 7, materials: ["metal", "metal"] }],
  ];
}

/** 1..n */
export function versions(n, from = 1) {
  return Array.from({ length: n - from + 1 }, (_, i) => from + i);
}
