// The Orchestra pages: the list of games, the live board (watch), the replay viewer and the play page.
//
// No rule lives here: views come from the server (the websocket, or GET /games/{id}?at=N), and where a
// token may go comes from GET /games/{id}/legal. Everything a client chose (player names above all) is
// inserted as text (textContent, text nodes), never as markup.

const ERA_ORDER = ["baroque", "classical", "romantic"];
// Drawn as the board lies: the rare row at the back (top), the strings row at the front (bottom).
const FAMILY_ROWS = ["percussion_keyboards", "winds", "strings"];
const FAMILY_COLUMNS = ["strings", "winds", "percussion_keyboards"];
const MATERIALS = ["wood", "metal", "animal"];

const page = document.body.dataset.page;
const parts = location.pathname.split("/");
const gameId = parts[1] === "games" ? decodeURIComponent(parts[2] || "") : "";
const secret = new URLSearchParams(location.hash.slice(1)).get("token");

// Small helpers --------------------------------------------------------------------------------------

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function $(id) {
  return document.getElementById(id);
}

function title(id) {
  return String(id)
    .replace("_keyboards", " & keyboards")
    .replaceAll("_", " ")
    .replace(/(^|\s)\w/g, (c) => c.toUpperCase());
}

function article(words) {
  return /^[AEIOU]/i.test(words) ? `an ${words}` : `a ${words}`;
}

function amounts(gained) {
  const items = Object.entries(gained || {}).filter(([, n]) => n);
  if (!items.length) return "nothing";
  return items.map(([key, n]) => `+${n} ${key.replaceAll("_", " ")}`).join(", ");
}

function bonusWords(bonus) {
  return Object.entries(bonus)
    .map(([key, n]) => (key === "material_choice" ? `${n} material of choice` : `${n} ${key.replaceAll("_", " ")}`))
    .join(", ");
}

function tokenWords(token) {
  if (token.kind === "instrument") return article(`${title(token.instrument)} instrument`);
  if (token.kind === "performance") return article(`${title(token.era)} performance`);
  if (token.kind === "repair") return article(`${title(token.family)} repair`);
  return "a token";
}

function tokenShort(token) {
  if (token.kind === "instrument") return title(token.instrument);
  if (token.kind === "performance") return `${title(token.era)} perf.`;
  if (token.kind === "repair") return `${title(token.family)} repair`;
  return "?";
}

function showError(message) {
  const box = $("error");
  if (!box) return;
  box.hidden = !message;
  box.textContent = message || "";
}

async function api(path) {
  const headers = secret ? { authorization: `Bearer ${secret}` } : {};
  const response = await fetch(path, { headers, cache: "no-store" });
  if (!response.ok) {
    let detail = `HTTP ${response.status}`;
    try {
      const body = await response.json();
      detail = `${body.code}: ${body.message}`;
    } catch (_) {
      /* not JSON */
    }
    throw new Error(detail);
  }
  return response;
}

async function fetchEvents() {
  const text = await (await api(`/games/${encodeURIComponent(gameId)}/events`)).text();
  return text
    .split("\n")
    .filter((line) => line.trim())
    .map((line) => JSON.parse(line));
}

// The board --------------------------------------------------------------------------------------------

class Board {
  constructor(root, layout, players) {
    this.root = root;
    this.layout = layout;
    this.players = players;
    this.spaces = new Map(layout.spaces.map((space) => [space.id, space]));
    this.cells = new Map();
    this.seen = new Map();
    this.scoreSeen = new Map();
    this.scores = [];
    this.version = 0;
    this.draw();
  }

  name(seat) {
    if (seat === null || seat === undefined) return "the server";
    return this.players[seat] ?? `seat ${seat}`;
  }

  spaceName(id) {
    const space = this.spaces.get(id);
    if (!space) return title(id);
    if (space.eras.length === 2) return `${title(space.instrument)} (${space.eras.map(title).join("/")})`;
    return title(space.instrument);
  }

  // Four sub-columns per era; a space straddling two eras takes the last of one and the first of the next.
  columns(space, row) {
    if (!space.eras.length) {
      const start = 2 + 4 * FAMILY_COLUMNS.indexOf(space.family);
      return [start, start + 4];
    }
    const first = ERA_ORDER.indexOf(space.eras[0]);
    if (space.eras.length === 2) return [2 + 4 * first + 3, 2 + 4 * first + 5];
    let start = 2 + 4 * first;
    let end = start + 4;
    for (const other of row) {
      if (other.eras.length !== 2) continue;
      const from = ERA_ORDER.indexOf(other.eras[0]);
      if (from === first - 1) start += 1;
      if (from === first) end -= 1;
    }
    return [start, end];
  }

  draw() {
    this.root.replaceChildren();
    ERA_ORDER.forEach((era, index) => {
      const head = el("div", "era-head", title(era));
      head.style.gridColumn = `${2 + 4 * index} / ${6 + 4 * index}`;
      head.style.gridRow = "1";
      this.root.append(head);
    });
    const rows = [["rare", this.layout.spaces.filter((s) => !s.eras.length)]];
    for (const family of FAMILY_ROWS) {
      rows.push([family, this.layout.spaces.filter((s) => s.eras.length && s.family === family)]);
    }
    rows.forEach(([label, spaces], index) => {
      const head = el("div", `row-head row-${label}`, label === "rare" ? "Rare" : title(label));
      head.style.gridRow = `${index + 2}`;
      head.style.gridColumn = "1";
      this.root.append(head);
      for (const space of spaces) {
        const cell = el("div", `space family-${space.family}${space.eras.length ? "" : " rare"}`);
        cell.dataset.space = space.id;
        const [start, end] = this.columns(space, spaces);
        cell.style.gridColumn = `${start} / ${end}`;
        cell.style.gridRow = `${index + 2}`;
        const top = el("div", "space-top");
        top.append(el("span", "space-name", title(space.instrument)));
        top.append(el("span", "prestige", `${space.prestige}\u2605`));
        cell.append(top);
        if (space.eras.length === 2) cell.append(el("div", "straddle", space.eras.map(title).join(" / ")));
        cell.append(el("div", "bonus", bonusWords(space.bonus)));
        const chair = el("div", "chair");
        const below = el("div", "below");
        cell.append(chair);
        if (space.eras.length) {
          cell.append(el("div", "line"));
          cell.append(below);
        }
        this.root.append(cell);
        this.cells.set(space.id, { cell, chair, below });
      }
    });
  }

  chip(seated, big) {
    const chip = el("span", `chip seat-${seated.seat % 4}${big ? " big" : ""}`);
    chip.dataset.seat = String(seated.seat);
    chip.title = `${this.name(seated.seat)}: ${tokenWords(seated.token)}`;
    chip.append(el("span", "who", this.name(seated.seat)));
    chip.append(el("span", "what", tokenShort(seated.token)));
    return chip;
  }

  render(view, animate) {
    if (view.players) this.players = view.players.map((p) => p.name);
    for (const [id, held] of Object.entries(view.spaces)) {
      const found = this.cells.get(id);
      if (!found) continue;
      const { cell, chair, below } = found;
      const signature = JSON.stringify(held);
      const changed = this.seen.has(id) && this.seen.get(id) !== signature;
      this.seen.set(id, signature);
      if (held.kind === "rare" || Array.isArray(held.chairs)) {
        const chairs = held.chairs || [];
        chair.replaceChildren(...chairs.map((s) => this.chip(s, false)));
        if (!chairs.length) chair.append(el("span", "empty", "no chair yet"));
        if (chairs.length) cell.dataset.chairSeats = chairs.map((s) => s.seat).join(" ");
        else delete cell.dataset.chairSeats;
      } else {
        this.drawChair(cell, chair, held.chair);
        below.replaceChildren(...(held.below || []).map((s) => this.chip(s, false)));
      }
      if (changed && animate) flash(cell);
    }
    for (const [id, addition] of Object.entries(view.added || {})) {
      if (!this.extend(id, addition, animate)) return false;
    }
    if (view.scores) this.scores = view.scores;
    for (const change of view.score_changes || []) {
      if (!this.changeScore(change)) return false;
    }
    this.renderScores(animate);
    this.version = view.version;
    this.root.dataset.version = String(view.version);
    document.body.classList.toggle("ended", Boolean(view.ended));
    return true;
  }

  // A standard space's First Chair (null: empty).
  drawChair(cell, chair, seated) {
    chair.replaceChildren(seated ? this.chip(seated, true) : el("span", "empty", "empty chair"));
    if (seated) cell.dataset.chairSeat = String(seated.seat);
    else delete cell.dataset.chairSeat;
  }

  // A view delta's additions to one space, drawn without redrawing what the space already shows; false
  // when they do not start where the drawn lists end (this page missed something: it must resync).
  extend(id, addition, animate) {
    const found = this.cells.get(id);
    if (!found) return true;
    const { cell, chair, below } = found;
    this.seen.delete(id);
    if (addition.kind === "rare") {
      const drawn = chair.querySelectorAll(".chip").length;
      if (drawn !== addition.chairs_from) return false;
      if (!addition.chairs.length) return true;
      if (!drawn) chair.replaceChildren();
      chair.append(...addition.chairs.map((s) => this.chip(s, false)));
      const seats = addition.chairs.map((s) => s.seat).join(" ");
      cell.dataset.chairSeats = drawn ? `${cell.dataset.chairSeats} ${seats}` : seats;
    } else {
      if (below.childElementCount !== addition.below_from) return false;
      this.drawChair(cell, chair, addition.chair);
      below.append(...addition.below.map((s) => this.chip(s, false)));
    }
    if (animate) flash(cell);
    return true;
  }

  // A view delta's change to one seat's score: its chairs rebuilt from their counts in layout order (the
  // view's order); false when the seat is not on the board (this page missed something: it must resync).
  changeScore(change) {
    const index = this.scores.findIndex((score) => score.seat === change.seat);
    if (index < 0) return false;
    const counts = new Map();
    for (const id of this.scores[index].chairs) counts.set(id, (counts.get(id) || 0) + 1);
    for (const [id, count] of Object.entries(change.held || {})) counts.set(id, count);
    const chairs = [];
    for (const space of this.layout.spaces) {
      for (let n = counts.get(space.id) || 0; n > 0; n -= 1) chairs.push(space.id);
    }
    this.scores = this.scores.map((score, at) =>
      at === index ? { ...score, chairs, prestige: change.prestige, resources: change.resources } : score);
    return true;
  }

  renderScores(animate) {
    const body = $("scores").querySelector("tbody");
    const rows = [];
    for (const score of this.scores) {
      const row = el("tr", `seat-${score.seat % 4}`);
      row.dataset.seat = String(score.seat);
      const who = el("td", "who");
      who.append(el("span", `dot seat-${score.seat % 4}`));
      who.append(document.createTextNode(this.name(score.seat)));
      row.append(who);
      const chairs = el("td", "chairs", String(score.chairs.length));
      chairs.title = score.chairs.map((id) => this.spaceName(id)).join(", ");
      row.append(chairs);
      row.append(el("td", "prestige", String(score.prestige)));
      row.append(el("td", "resources", amounts(score.resources).replaceAll("+", "")));
      const signature = JSON.stringify(score);
      if (animate && this.scoreSeen.has(score.seat) && this.scoreSeen.get(score.seat) !== signature) {
        flash(row);
      }
      this.scoreSeen.set(score.seat, signature);
      rows.push(row);
    }
    body.replaceChildren(...rows);
  }

  // The log: one line per envelope, in words; parts are text or {seat} for a coloured name.
  describe(envelope) {
    const e = envelope.event;
    const who = { seat: e.seat ?? envelope.seat };
    const space = e.space ? this.spaceName(e.space) : "";
    switch (e.type) {
      case "GameCreated":
        return [`Game created for ${joinNames(e.players)} on the ${e.layout.name} layout`];
      case "ChairClaimed": {
        const rare = this.spaces.get(e.space)?.eras.length === 0;
        const verb = rare ? ` takes a ${space} chair with ` : ` claims the ${space} chair with `;
        return [who, verb, `${tokenWords(e.token)}: ${amounts(e.bonus)}${e.doubled ? " (doubled)" : ""}`];
      }
      case "ChairStolen":
        if (e.from_seat === e.seat) {
          return [who, ` takes the ${space} chair from their own token with ${tokenWords(e.token)}: `,
            `${amounts(e.bonus)}${e.doubled ? " (doubled)" : ""}`];
        }
        return [who, ` steals the ${space} chair from `, { seat: e.from_seat }, ` with ${tokenWords(e.token)}: `,
          `${amounts(e.bonus)}${e.doubled ? " (doubled)" : ""}`];
      case "PlacedBelowLine": {
        const why = { instrument_holds: "an instrument holds the chair", no_majority: "no majority",
          own_chair: "already holds the chair" }[e.reason] || e.reason;
        return [who, ` places ${tokenWords(e.token)} below the line in ${space} (${why}): ${amounts(e.consolation)}`];
      }
      case "GameEnded": {
        const out = [who, " ends the game. Final:"];
        (e.ranking || []).forEach((rank, index) => {
          out.push(index ? "; " : " ", { seat: rank.seat }, ` ${ordinal(rank.rank)} with ${rank.prestige} prestige`);
        });
        return out;
      }
      default:
        return [`${e.type}`];
    }
  }

  logLine(envelope) {
    const item = el("li", "entry");
    item.dataset.version = String(envelope.version);
    item.append(el("span", "v", `${envelope.version}`));
    const text = el("span", "text");
    for (const part of this.describe(envelope)) {
      if (typeof part === "string") text.append(document.createTextNode(part));
      else text.append(el("span", `name seat-${part.seat % 4}`, this.name(part.seat)));
    }
    item.append(text);
    return item;
  }
}

function joinNames(names) {
  if (names.length < 2) return names.join("");
  return `${names.slice(0, -1).join(", ")} and ${names[names.length - 1]}`;
}

function ordinal(n) {
  const tens = n % 100;
  if (tens >= 11 && tens <= 13) return `${n}th`;
  return `${n}${{ 1: "st", 2: "nd", 3: "rd" }[n % 10] || "th"}`;
}

function flash(node) {
  node.classList.remove("flash");
  void node.offsetWidth; // restart the animation
  node.classList.add("flash");
  setTimeout(() => node.classList.remove("flash"), 1600);
}

// A live connection: hello (with since), welcome, events; reconnects by itself with since -------------

class Live {
  constructor(handlers) {
    this.handlers = handlers;
    this.since = 0; // the whole history first: its GameCreated carries the layout
    this.delay = 250;
    this.socket = null;
    this.stopped = false;
  }

  status(state, words) {
    const badge = $("status");
    if (!badge) return;
    badge.dataset.status = state;
    badge.textContent = words || state;
  }

  connect() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const socket = new WebSocket(`${scheme}//${location.host}/games/${encodeURIComponent(gameId)}/ws`);
    this.socket = socket;
    // "delta" (the default, said anyway): live frames carry only what changed (the whole view grows with
    // the game).
    socket.onopen = () =>
      socket.send(JSON.stringify({ type: "hello", token: secret, since: this.since, view: "delta" }));
    socket.onmessage = (message) => {
      const frame = JSON.parse(message.data);
      if (frame.type === "welcome") {
        this.delay = 250;
        this.status("live", "live");
        this.handlers.welcome(frame);
      } else if (frame.type === "events") {
        const fresh = frame.envelopes.filter((env) => env.version > this.since);
        for (const env of fresh) this.since = env.version;
        // A delta renders like a view: render() draws what it adds to the spaces it names, and the scores
        // that changed.
        this.handlers.events(fresh, frame.view || frame.view_delta || null);
      } else if (frame.type === "accepted" || frame.type === "rejected") {
        this.handlers.answer?.(frame);
      }
    };
    socket.onclose = (event) => {
      if (this.socket !== socket || this.stopped) return;
      if (event.code === 1008) {
        this.stopped = true;
        this.status("refused", "refused");
        showError(`The server refused this page: ${event.reason || "not allowed"}`);
        return;
      }
      if (event.code === 1011) {
        // damaged_game: the stored history cannot be read; reconnecting cannot help until it is restored.
        this.stopped = true;
        this.status("damaged", "damaged");
        showError(`This game cannot be shown: ${event.reason || "its stored history is damaged"}`);
        return;
      }
      // 1012 (restart), 1013 (busy) or a drop: again after a random wait under a doubling ceiling, so the
      // pages a restart closed together do not all come back in the same instant.
      this.status("reconnecting", "reconnecting\u2026");
      setTimeout(() => this.connect(), Math.random() * this.delay);
      this.delay = Math.min(this.delay * 2, 2000);
    };
  }

  // Start again from a welcome's whole view (the connection closes, and reconnects with since).
  resync() {
    this.socket?.close();
  }

  send(frame) {
    if (this.socket && this.socket.readyState === WebSocket.OPEN) {
      this.socket.send(JSON.stringify(frame));
      return true;
    }
    return false;
  }
}

// Pages ----------------------------------------------------------------------------------------------

function livePage(extra) {
  let board = null;
  let pendingView = null;
  const logged = new Set();
  const log = $("log");
  const live = new Live({
    welcome(frame) {
      extra?.welcome?.(frame);
      if (board) board.render(frame.view, true);
      else pendingView = frame.view;
    },
    events(envelopes, view) {
      for (const env of envelopes) {
        if (env.event.type === "GameCreated" && !board) {
          board = new Board($("board"), env.event.layout, env.event.players);
          extra?.board?.(board);
        }
        if (!board || logged.has(env.version)) continue;
        logged.add(env.version);
        const line = board.logLine(env);
        log.prepend(line);
        if (view) flash(line);
      }
      log.dataset.version = String(live.since);
      if (!board) return;
      if (pendingView) {
        board.render(pendingView, false);
        pendingView = null;
      }
      if (view && view.version >= board.version && !board.render(view, true)) live.resync();
      if (view?.ended || envelopes.some((env) => env.event.type === "GameEnded")) live.status("live", "game over");
    },
    answer(frame) {
      extra?.answer?.(frame);
    },
  });
  live.connect();
  return live;
}

function setTitle(words) {
  $("title").textContent = words;
  document.title = `Orchestra: ${words}`;
}

function linkWithSecret(path) {
  return secret ? `${path}#token=${encodeURIComponent(secret)}` : path;
}

function watchPage() {
  setTitle(`game ${gameId}`);
  $("replay-link").href = linkWithSecret(`/games/${encodeURIComponent(gameId)}/replay`);
  livePage({});
}

async function replayPage() {
  setTitle(`replay of game ${gameId}`);
  $("watch-link").href = linkWithSecret(`/games/${encodeURIComponent(gameId)}/watch`);
  let envelopes;
  try {
    envelopes = await fetchEvents();
  } catch (error) {
    showError(`Cannot read the game: ${error.message}`);
    return;
  }
  const created = envelopes[0].event;
  const board = new Board($("board"), created.layout, created.players);
  const last = envelopes[envelopes.length - 1].version;
  const log = $("log");
  const lines = new Map();
  for (const env of envelopes) {
    const line = board.logLine(env);
    lines.set(env.version, line);
    log.prepend(line);
  }
  const slider = $("slider");
  slider.max = String(last);
  const views = new Map();
  let wanted = 0;

  async function go(target) {
    const at = Math.max(1, Math.min(last, Number.parseInt(target, 10) || last));
    wanted = at;
    slider.value = String(at);
    $("position").textContent = `version ${at} of ${last}`;
    for (const [version, line] of lines) {
      line.classList.toggle("future", version > at);
      line.classList.toggle("current", version === at);
    }
    const current = $("current");
    current.replaceChildren(...lines.get(at).querySelector(".text").cloneNode(true).childNodes);
    history.replaceState(null, "", `?at=${at}${location.hash}`);
    try {
      if (!views.has(at)) views.set(at, await (await api(`/games/${encodeURIComponent(gameId)}?at=${at}`)).json());
    } catch (error) {
      showError(`Cannot read version ${at}: ${error.message}`);
      return;
    }
    if (wanted === at) board.render(views.get(at), true);
  }

  slider.addEventListener("input", () => go(slider.value));
  $("first").addEventListener("click", () => go(1));
  $("prev").addEventListener("click", () => go(wanted - 1));
  $("next").addEventListener("click", () => go(wanted + 1));
  $("last").addEventListener("click", () => go(last));
  document.addEventListener("keydown", (event) => {
    if (event.target === slider || event.altKey || event.ctrlKey || event.metaKey) return;
    const moves = { ArrowLeft: wanted - 1, ArrowRight: wanted + 1, Home: 1, End: last };
    if (!(event.key in moves)) return;
    event.preventDefault();
    go(moves[event.key]);
  });
  await go(new URLSearchParams(location.search).get("at") ?? last);
  document.body.dataset.ready = "true";
}

function playPage() {
  setTitle(`game ${gameId}`);
  if (!secret) {
    showError("This page needs your seat token in its address: /games/<id>/play#token=<your token>.");
    return;
  }
  let board = null;
  let legal = { spaces: [], materials: {} };
  let seat = null;
  let counter = 0;
  const message = $("message");
  const kind = $("kind");
  const which = $("which");
  for (const select of [$("material1"), $("material2")]) {
    for (const material of MATERIALS) select.append(new Option(material, material));
  }

  function token() {
    const value = which.value;
    if (kind.value === "instrument") return { kind: "instrument", instrument: value };
    if (kind.value === "performance") return { kind: "performance", era: value };
    return { kind: "repair", family: value };
  }

  function fillWhich() {
    if (!board) return;
    const spaces = board.layout.spaces;
    let options;
    if (kind.value === "instrument") options = [...new Set(spaces.map((s) => s.instrument))];
    else if (kind.value === "performance") options = ERA_ORDER.filter((era) => spaces.some((s) => s.eras.includes(era)));
    else options = FAMILY_COLUMNS;
    which.replaceChildren(...options.map((id) => new Option(title(id), id)));
  }

  async function refreshLegal() {
    if (!board) return;
    const query = new URLSearchParams({ token: JSON.stringify(token()), skill: $("skill").value || "1" });
    try {
      legal = await (await api(`/games/${encodeURIComponent(gameId)}/legal?${query}`)).json();
    } catch (error) {
      message.textContent = `Cannot ask where this token may go: ${error.message}`;
      return;
    }
    const allowed = new Set(legal.spaces);
    for (const [id, { cell }] of board.cells) {
      cell.dataset.legal = allowed.has(id) ? "true" : "false";
    }
    const most = Math.max(0, ...Object.values(legal.materials));
    $("materials").hidden = most === 0;
    $("material2").hidden = most < 2;
  }

  function place(spaceId) {
    if (!legal.spaces.includes(spaceId)) {
      message.textContent = `${tokenWords(token())} cannot go to ${board.spaceName(spaceId)}.`;
      return;
    }
    const frame = {
      type: "place",
      id: `web-${Date.now().toString(36)}-${(counter += 1)}`,
      token: token(),
      space: spaceId,
      skill: Number.parseInt($("skill").value, 10) || 1,
      consolation: $("consolation").value,
    };
    const needed = legal.materials[spaceId] || 0;
    if (needed) frame.materials = [$("material1").value, $("material2").value].slice(0, needed);
    if (!live.send(frame)) message.textContent = "Not connected; try again in a moment.";
    else message.textContent = `Placing ${tokenWords(frame.token)} in ${board.spaceName(spaceId)}\u2026`;
  }

  const live = livePage({
    board(made) {
      board = made;
      fillWhich();
      refreshLegal();
      board.root.addEventListener("click", (event) => {
        const cell = event.target.closest("[data-space]");
        if (cell) place(cell.dataset.space);
      });
    },
    welcome(frame) {
      seat = frame.seat;
      if (seat === null || seat === undefined) {
        $("me").textContent = "You are watching (this token has no seat).";
        return;
      }
      const name = frame.view.players.find((p) => p.seat === seat)?.name ?? `seat ${seat}`;
      $("me").replaceChildren(document.createTextNode("You are "), el("span", `name seat-${seat % 4}`, name));
      $("end-game").hidden = seat !== 0 || frame.view.ended;
    },
    answer(frame) {
      if (frame.type === "accepted") message.textContent = `Accepted (version ${frame.version}).`;
      else message.textContent = `Rejected (${frame.code}): ${frame.message}`;
    },
  });
  kind.addEventListener("change", () => {
    fillWhich();
    refreshLegal();
  });
  for (const id of ["which", "skill"]) $(id).addEventListener("change", refreshLegal);
  $("picker").addEventListener("submit", (event) => event.preventDefault());
  $("end-game").addEventListener("click", () => {
    live.send({ type: "end_game", id: `web-end-${Date.now().toString(36)}` });
  });
}

async function indexPage() {
  const body = $("games").querySelector("tbody");
  async function refresh() {
    let games;
    try {
      games = await (await api("/games")).json();
      showError("");
    } catch (error) {
      showError(`Cannot list the games: ${error.message}`);
      return;
    }
    const rows = games.map((game) => {
      const row = el("tr");
      row.dataset.game = game.game_id;
      const id = el("td", "id");
      const link = el("a", "", game.game_id);
      link.href = `/games/${encodeURIComponent(game.game_id)}/watch`;
      id.append(link);
      row.append(id);
      const players = el("td", "players");
      game.players.forEach((name, seat) => {
        if (seat) players.append(document.createTextNode(", "));
        players.append(el("span", `name seat-${seat % 4}`, name));
      });
      row.append(players);
      row.append(el("td", "version", String(game.version)));
      row.append(el("td", game.ended ? "ended" : "live", game.ended ? "ended" : "live"));
      const links = el("td", "links");
      const watch = el("a", "", game.ended ? "view" : "watch");
      watch.href = `/games/${encodeURIComponent(game.game_id)}/watch`;
      const replay = el("a", "", "replay");
      replay.href = `/games/${encodeURIComponent(game.game_id)}/replay`;
      links.append(watch, document.createTextNode(" \u00b7 "), replay);
      row.append(links);
      return row;
    });
    body.replaceChildren(...rows);
    $("empty").hidden = games.length > 0;
    document.body.dataset.ready = "true";
  }
  await refresh();
  setInterval(refresh, 5000);
}

const pages = { index: indexPage, watch: watchPage, replay: replayPage, play: playPage };
pages[page]?.();
