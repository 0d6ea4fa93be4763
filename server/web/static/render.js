// What the pages share: the page's game and secret, small DOM helpers, the board, and the log in words.
//
// No rule and no wire handling lives here: views, deltas and frames are the client library's
// (/client/orchestra.js), and where a token may go comes from GET /games/{id}/legal. Everything a client
// chose (player names above all) is inserted as text (textContent, text nodes), never as markup.

import { describeToken, ERAS, FAMILIES, nameOf, PLACEMENT_EVENTS } from "/client/orchestra.js";

// Drawn as the board lies: the rare row at the back (top), the strings row at the front (bottom).
const FAMILY_ROWS = ["percussion_keyboards", "winds", "strings"];

const parts = location.pathname.split("/");
/** The game of this page (from /games/{id}/...), and the token in its address's fragment (#token=...),
 * which browsers never send. */
export const gameId = parts[1] === "games" ? decodeURIComponent(parts[2] || "") : "";
export const secret = new URLSearchParams(location.hash.slice(1)).get("token");
export const origin = location.origin;

export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

export function $(id) {
  return document.getElementById(id);
}

export function showError(message) {
  const box = $("error");
  if (!box) return;
  box.hidden = !message;
  box.textContent = message || "";
}

export function status(state, words) {
  const badge = $("status");
  if (!badge) return;
  badge.dataset.status = state;
  badge.textContent = words || state;
}

export function setTitle(words) {
  $("title").textContent = words;
  document.title = `Orchestra: ${words}`;
}

export function linkWithSecret(path) {
  return secret ? `${path}#token=${encodeURIComponent(secret)}` : path;
}

/** A seat's dot, in its colour: filled while the seat has a connection open (on any node), a ring while
 * it has none; filled while that is not known. */
export function seatDot(seat, online) {
  const dot = el("span", `dot presence seat-${seat % 4}`);
  if (online !== undefined && online !== null) {
    dot.dataset.online = String(Boolean(online));
    dot.title = online ? "connected" : "not connected";
  }
  return dot;
}

/** How many spectators watch, in the page's header. */
export function showWatching(count) {
  const badge = $("watching");
  if (!badge) return;
  badge.hidden = false;
  badge.dataset.count = String(count);
  badge.textContent = count === 1 ? "1 spectator" : `${count} spectators`;
}

export function flash(node) {
  node.classList.remove("flash");
  void node.offsetWidth; // restart the animation
  node.classList.add("flash");
  setTimeout(() => node.classList.remove("flash"), 1600);
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

function joinNames(names) {
  if (names.length < 2) return names.join("");
  return `${names.slice(0, -1).join(", ")} and ${names[names.length - 1]}`;
}

function ordinal(n) {
  const tens = n % 100;
  if (tens >= 11 && tens <= 13) return `${n}th`;
  return `${n}${{ 1: "st", 2: "nd", 3: "rd" }[n % 10] || "th"}`;
}

// The board --------------------------------------------------------------------------------------------

export class Board {
  constructor(root, layout, players) {
    this.root = root;
    this.layout = layout;
    this.players = players;
    this.spaces = new Map(layout.spaces.map((space) => [space.id, space]));
    this.cells = new Map();
    this.seen = new Map();
    this.shown = new Map(); // each space as last drawn, to find the tokens that left it
    this.scoreSeen = new Map();
    this.lastPlaced = null; // the last placement described: what a take-back that follows takes back
    this.version = 0;
    this.presence = null;
    this.draw();
  }

  name(seat) {
    if (seat === null || seat === undefined) return "the server";
    return this.players[seat] ?? `seat ${seat + 1}`;
  }

  spaceName(id) {
    const space = this.spaces.get(id);
    if (!space) return nameOf(id);
    if (space.eras.length === 2) return `${nameOf(space.instrument)} (${space.eras.map(nameOf).join("/")})`;
    return nameOf(space.instrument);
  }

  // Four sub-columns per era; a space straddling two eras takes the last of one and the first of the next.
  columns(space, row) {
    if (!space.eras.length) {
      const start = 2 + 4 * FAMILIES.indexOf(space.family);
      return [start, start + 4];
    }
    const first = ERAS.indexOf(space.eras[0]);
    if (space.eras.length === 2) return [2 + 4 * first + 3, 2 + 4 * first + 5];
    let start = 2 + 4 * first;
    let end = start + 4;
    for (const other of row) {
      if (other.eras.length !== 2) continue;
      const from = ERAS.indexOf(other.eras[0]);
      if (from === first - 1) start += 1;
      if (from === first) end -= 1;
    }
    return [start, end];
  }

  draw() {
    this.root.replaceChildren();
    ERAS.forEach((era, index) => {
      const head = el("div", "era-head", nameOf(era));
      head.style.gridColumn = `${2 + 4 * index} / ${6 + 4 * index}`;
      head.style.gridRow = "1";
      this.root.append(head);
    });
    const rows = [["rare", this.layout.spaces.filter((s) => !s.eras.length)]];
    for (const family of FAMILY_ROWS) {
      rows.push([family, this.layout.spaces.filter((s) => s.eras.length && s.family === family)]);
    }
    rows.forEach(([label, spaces], index) => {
      const head = el("div", `row-head row-${label}`, label === "rare" ? "Rare" : nameOf(label));
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
        top.append(el("span", "space-name", nameOf(space.instrument)));
        top.append(el("span", "prestige", `${space.prestige}\u2605`));
        cell.append(top);
        if (space.eras.length === 2) cell.append(el("div", "straddle", space.eras.map(nameOf).join(" / ")));
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
    chip.title = `${this.name(seated.seat)}: ${describeToken(seated.token)}`;
    chip.append(el("span", "who", this.name(seated.seat)));
    chip.append(el("span", "what", describeToken(seated.token, { short: true })));
    return chip;
  }

  // Draw a whole view; only the spaces and scores that changed since the last one are drawn again (and,
  // when `animate`, flash).
  // `names`: a seat's name changed (an open seat taken), so every space and score is drawn again.
  render(view, animate, names = false) {
    // A seat still open in the view may have a name already, from its SeatTaken event.
    if (view.players) this.players = view.players.map((p, seat) => p.name ?? this.players[seat] ?? null);
    if (names) {
      this.seen.clear();
      this.scoreSeen.clear();
    }
    for (const [id, held] of Object.entries(view.spaces)) {
      const found = this.cells.get(id);
      if (!found) continue;
      const signature = JSON.stringify(held);
      if (this.seen.get(id) === signature) continue;
      const changed = this.seen.has(id);
      this.seen.set(id, signature);
      const before = this.shown.get(id);
      this.shown.set(id, held);
      const { cell, chair, below } = found;
      if (held.kind === "rare") {
        const chairs = held.chairs;
        chair.replaceChildren(...chairs.map((s) => this.chip(s, false)));
        if (!chairs.length) chair.append(el("span", "empty", "no chair yet"));
        if (chairs.length) cell.dataset.chairSeats = chairs.map((s) => s.seat).join(" ");
        else delete cell.dataset.chairSeats;
      } else {
        chair.replaceChildren(held.chair ? this.chip(held.chair, true) : el("span", "empty", "empty chair"));
        if (held.chair) cell.dataset.chairSeat = String(held.chair.seat);
        else delete cell.dataset.chairSeat;
        below.replaceChildren(...held.below.map((s) => this.chip(s, false)));
      }
      if (changed && animate) {
        flash(cell);
        if (before) this.showLeaving(before, held, chair, below);
      }
    }
    this.renderScores(view.scores, animate);
    this.version = view.version;
    this.root.dataset.version = String(view.version);
    document.body.classList.toggle("ended", Boolean(view.ended));
  }

  // The tokens that left a space (a take-back, or a replay stepping back): each fades out where it was,
  // drawn apart from the chips (class `leaving`, not `chip`), and gone once its animation has played.
  showLeaving(before, held, chair, below) {
    const key = (seated) => JSON.stringify([seated.seat, seated.token]);
    const after = held.kind === "rare" ? held.chairs : [held.chair, ...held.below];
    const left = new Map();
    for (const seated of after) if (seated) left.set(key(seated), (left.get(key(seated)) ?? 0) + 1);
    const placed = before.kind === "rare" ? before.chairs.map((s) => [s, chair]) : [[before.chair, chair], ...before.below.map((s) => [s, below])];
    for (const [seated, where] of placed) {
      if (!seated) continue;
      const count = left.get(key(seated)) ?? 0;
      if (count > 0) {
        left.set(key(seated), count - 1);
        continue;
      }
      const ghost = el("span", `leaving seat-${seated.seat % 4}`);
      ghost.dataset.seat = String(seated.seat);
      ghost.title = `${this.name(seated.seat)}: ${describeToken(seated.token)} (taken back)`;
      ghost.append(el("span", "who", this.name(seated.seat)));
      ghost.append(el("span", "what", describeToken(seated.token, { short: true })));
      where.append(ghost);
      setTimeout(() => ghost.remove(), 1600);
    }
  }

  // Draw only who holds each First Chair (the wall's small boards): `chairs` maps a space to its holders'
  // seats, as the wall feed carries them; the same data attributes as a whole view's board.
  showChairs(chairs, animate) {
    for (const [id, seats] of Object.entries(chairs)) {
      const found = this.cells.get(id);
      if (!found) continue;
      const signature = seats.join(" ");
      if (this.seen.get(id) === signature) continue;
      const changed = this.seen.has(id);
      this.seen.set(id, signature);
      const { cell, chair } = found;
      const marks = seats.map((seat) => {
        const mark = el("span", `chip seat-${seat % 4}`, this.name(seat));
        mark.dataset.seat = String(seat);
        mark.title = `${this.name(seat)} holds a ${this.spaceName(id)} chair`;
        return mark;
      });
      chair.replaceChildren(...marks);
      if (this.spaces.get(id)?.eras.length === 0) {
        if (seats.length) cell.dataset.chairSeats = signature;
        else delete cell.dataset.chairSeats;
      } else if (seats.length) {
        cell.dataset.chairSeat = String(seats[0]);
      } else {
        delete cell.dataset.chairSeat;
      }
      if (changed && animate) flash(cell);
    }
  }

  // Who is at the table (a presence frame's `seats` and `spectators`): each seat's dot in the scores.
  showPresence(presence) {
    this.presence = presence;
    for (const row of $("scores").querySelectorAll("tbody tr")) {
      row.querySelector(".presence")?.replaceWith(this.seatDot(Number(row.dataset.seat)));
    }
  }

  seatDot(seat) {
    return seatDot(seat, this.presence?.seats.find((s) => s.seat === seat)?.online);
  }

  renderScores(scores, animate) {
    const body = $("scores").querySelector("tbody");
    const rows = [];
    for (const score of scores) {
      const row = el("tr", `seat-${score.seat % 4}`);
      row.dataset.seat = String(score.seat);
      const who = el("td", "who");
      who.append(this.seatDot(score.seat));
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
    const token = e.token ? describeToken(e.token) : "";
    const placed = this.lastPlaced;
    this.lastPlaced = PLACEMENT_EVENTS.includes(e.type) ? envelope : null;
    switch (e.type) {
      case "GameCreated": {
        const named = e.players.filter((name) => name !== null && name !== undefined);
        const open = e.players.length - named.length;
        const seats = open ? [...named, open === 1 ? "1 open seat" : `${open} open seats`] : named;
        return [`Game created for ${joinNames(seats)} on the ${e.layout.name} layout`];
      }
      case "SeatTaken":
        return [who, ` takes seat ${e.seat + 1}`];
      case "SeatClosed":
        return [`Seat ${e.seat + 1} is closed: it takes no part in this game`];
      case "SeatTokenReissued":
        return [`The host gives seat ${e.seat + 1} (`, who, ") a new link: the old one no longer works"];
      case "NextGame":
        return [`The next game is ${e.game_id}`];
      case "ChairClaimed": {
        const rare = this.spaces.get(e.space)?.eras.length === 0;
        const verb = rare ? ` takes a ${space} chair with ` : ` claims the ${space} chair with `;
        return [who, verb, `${token}: ${amounts(e.bonus)}${e.doubled ? " (doubled)" : ""}`];
      }
      case "ChairStolen":
        if (e.from_seat === e.seat) {
          return [who, ` takes the ${space} chair from their own token with ${token}: `,
            `${amounts(e.bonus)}${e.doubled ? " (doubled)" : ""}`];
        }
        return [who, ` steals the ${space} chair from `, { seat: e.from_seat }, ` with ${token}: `,
          `${amounts(e.bonus)}${e.doubled ? " (doubled)" : ""}`];
      case "PlacedBelowLine": {
        const why = { instrument_holds: "an instrument holds the chair", no_majority: "no majority",
          own_chair: "already holds the chair" }[e.reason] || e.reason;
        return [who, ` places ${token} below the line in ${space} (${why}): ${amounts(e.consolation)}`];
      }
      case "PlacementTakenBack": {
        // What it takes back is the placement just before it (its `version`).
        if (placed?.version !== e.version) return [who, ` takes back their placement of version ${e.version}`];
        return [who, ` takes back ${describeToken(placed.event.token)} from ${this.spaceName(placed.event.space)}`];
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

/** The wall's small board: the grid of Board, without its heads, each space only its name and who holds
 * its First Chairs (`showChairs`), with the same data attributes. A few elements a space: a wall draws
 * many of them. */
export class MiniBoard extends Board {
  draw() {
    this.root.replaceChildren();
    const rows = [this.layout.spaces.filter((s) => !s.eras.length)];
    for (const family of FAMILY_ROWS) rows.push(this.layout.spaces.filter((s) => s.eras.length && s.family === family));
    rows.forEach((spaces, index) => {
      for (const space of spaces) {
        const cell = el("div", `space family-${space.family}${space.eras.length ? "" : " rare"}`);
        cell.dataset.space = space.id;
        const [start, end] = this.columns(space, spaces);
        cell.style.gridColumn = `${start - 1} / ${end - 1}`; // no column of row heads
        cell.style.gridRow = `${index + 1}`;
        cell.title = this.spaceName(space.id);
        const chair = el("div", "chair");
        cell.append(el("span", "space-name", nameOf(space.instrument)), chair);
        this.root.append(cell);
        this.cells.set(space.id, { cell, chair, below: null });
      }
    });
  }
}
