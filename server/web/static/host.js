// The host page: the game's host token in the address's fragment. For each seat its play link, a copy
// button and a QR code a phone scans; the watch link and its QR code; who sat where and who is connected;
// the board, live; a seat's new link, closing an open seat, and the next game. The seat tokens come from
// the creation's answer, kept in this browser (keep.js `hosted`); a seat whose token this browser does not
// hold gets a new one on request. Host calls carry the host token as the Bearer header.

import { closeSeat as closeTheSeat, nextGame, PLACEMENT_EVENTS, reissueToken } from "/client/orchestra.js";
import { hosted, keepHosted } from "./keep.js";
import { livePage } from "./live.js";
import { drawQr } from "./qr.js";
import { refusalWords } from "./refusals.js";
import { $, el, gameId, origin, secret, seatDot, setTitle, showError } from "./render.js";

setTitle(`hosting game ${gameId}`);

const kept = hosted(gameId);
const base = `${origin}/games/${encodeURIComponent(gameId)}`;
let names = [];
let closed = new Set();
let online = new Map();
let started = false;
let ended = false;
let leaving = false;

function say(words, code) {
  const box = $("message");
  box.textContent = words;
  if (code) box.dataset.code = code;
  else delete box.dataset.code;
}

function playLink(token) {
  return `${base}/play#token=${encodeURIComponent(token)}`;
}

async function copy(text, button) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    // No clipboard API outside a secure context (a plain-HTTP address on a local network): select the
    // field's text and copy it the old way.
    const field = button.parentElement.querySelector("input");
    field.select();
    document.execCommand("copy");
  }
  button.textContent = "Copied";
  setTimeout(() => {
    button.textContent = "Copy";
  }, 1500);
}

function seatCard(seat) {
  let card = document.querySelector(`.seat-card[data-seat="${seat}"]`);
  if (card) return card;
  card = el("section", `seat-card seat-${seat % 4}`);
  card.dataset.seat = String(seat);
  const head = el("h2", "seat-head");
  const link = el("input", "link");
  link.readOnly = true;
  link.setAttribute("aria-label", `seat ${seat + 1}'s play link`);
  const copyButton = el("button", "copy", "Copy");
  copyButton.type = "button";
  copyButton.addEventListener("click", () => copy(link.value, copyButton));
  const row = el("div", "link-row");
  row.append(link, copyButton);
  const qr = el("canvas", "qr");
  const actions = el("div", "seat-actions");
  const reissue = el("button", "reissue", "New link");
  reissue.type = "button";
  reissue.title = "Give this seat a new link: the old one stops working at once";
  reissue.addEventListener("click", () => reissueSeat(seat));
  const close = el("button", "close-seat", "Close this seat");
  close.type = "button";
  close.title = "Play without this seat: it takes no part and is left out of the ranking";
  close.addEventListener("click", () => closeSeat(seat));
  actions.append(reissue, close);
  const note = el("p", "hint seat-note");
  card.append(head, row, note, qr, actions);
  $("seats").append(card);
  return card;
}

function drawSeat(seat) {
  const card = seatCard(seat);
  const name = names[seat];
  const isClosed = closed.has(seat);
  card.dataset.state = isClosed ? "closed" : name === null || name === undefined ? "open" : "taken";
  const head = card.querySelector(".seat-head");
  head.replaceChildren(seatDot(seat, online.get(seat)), document.createTextNode(`Seat ${seat + 1}: `));
  if (isClosed) head.append(el("span", "who", "closed"));
  else if (name === null || name === undefined) head.append(el("span", "who open", "open, waiting for a player"));
  else head.append(el("span", `name who seat-${seat % 4}`, name));
  if (online.get(seat)) head.append(el("span", "online", " \u00b7 connected"));
  const token = kept.seats[seat];
  const link = card.querySelector("input.link");
  const qr = card.querySelector("canvas.qr");
  const note = card.querySelector(".seat-note");
  if (token && !isClosed) {
    const address = playLink(token);
    if (link.value !== address) {
      link.value = address;
      drawQr(qr, address);
    }
    qr.hidden = false;
    note.textContent = "";
  } else {
    link.value = "";
    qr.hidden = true;
    note.textContent = isClosed ? "This seat takes no part." : "This browser does not hold this seat's link: make a new one.";
  }
  link.parentElement.hidden = !token || isClosed;
  card.querySelector(".reissue").hidden = isClosed || ended;
  card.querySelector(".close-seat").hidden = isClosed || started || !(name === null || name === undefined);
}

function drawSeats() {
  names.forEach((_, seat) => drawSeat(seat));
  $("play-again").disabled = !ended;
  $("play-again-hint").hidden = ended;
}

async function reissueSeat(seat) {
  say("");
  try {
    kept.seats[seat] = await reissueToken(origin, gameId, seat, secret);
    keepHosted(gameId, kept);
    say(`Seat ${seat + 1} has a new link: the old one no longer works.`);
  } catch (error) {
    say(refusalWords(error), error.code);
  }
  drawSeats();
}

async function closeSeat(seat) {
  say("");
  try {
    await closeTheSeat(origin, gameId, seat, secret);
    closed.add(seat);
    say(`Seat ${seat + 1} is closed.`);
  } catch (error) {
    say(refusalWords(error), error.code);
  }
  drawSeats();
}

// The next game: tokens carry over (the seats' and the host's), so the next game's host page draws the same
// seats' links; the `next_game` frame brings the next game's id (and the host token there).
function follow(nextId, token) {
  if (leaving) return;
  leaving = true;
  keepHosted(nextId, kept);
  location.assign(`/games/${encodeURIComponent(nextId)}/host#token=${encodeURIComponent(token || secret)}`);
}

async function playAgain() {
  $("play-again").disabled = true;
  say("");
  try {
    follow(await nextGame(origin, gameId, secret), secret);
  } catch (error) {
    say(refusalWords(error), error.code);
    $("play-again").disabled = !ended;
  }
}

if (!secret) {
  showError("This page needs the host token in its address: /games/<id>/host#token=<host token>.");
} else {
  $("play-again").addEventListener("click", playAgain);
  const connection = await livePage({
    // The host token opens the board as a spectator's (a private game's too), and brings next_game's token.
    token: secret,
    seats(now, closedNow) {
      names = now;
      closed = closedNow;
      drawSeats();
    },
    presence(presence) {
      online = new Map(presence.seats.map((s) => [s.seat, s.online]));
      drawSeats();
    },
    next: (frame) => follow(frame.game_id, frame.token),
  });
  if (connection) {
    const watch = kept.watch_token ? `${base}/watch#token=${encodeURIComponent(kept.watch_token)}` : `${base}/watch`;
    $("watch-link").value = watch;
    drawQr($("watch-qr"), watch);
    $("watch-copy").addEventListener("click", () => copy(watch, $("watch-copy")));
    $("watch-card").hidden = false;
    const look = () => {
      started = started || Boolean(connection.lastEnvelope && PLACEMENT_EVENTS.includes(connection.lastEnvelope.event.type));
      ended = Boolean(connection.view?.ended);
      drawSeats();
    };
    connection.on("events", (envelopes) => {
      started = started || envelopes.some((envelope) => PLACEMENT_EVENTS.includes(envelope.event.type));
      look();
    });
    look();
    document.body.dataset.ready = "true";
  }
}
