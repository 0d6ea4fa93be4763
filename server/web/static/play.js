// The play page: a seat's token in the address's fragment; pick a token, click a space. Where a token may
// go is the server's answer (GET /games/{id}/legal), never decided here; so is a take-back (the button is
// offered while the client library's `lastPlacement` says the last event is this seat's placement).

import { describeToken, ERAS, FAMILIES, getLegal, MATERIALS, nameOf } from "/client/orchestra.js";
import { livePage } from "./live.js";
import { refusalWords } from "./refusals.js";
import { $, el, gameId, origin, secret, setTitle, showError } from "./render.js";

setTitle(`game ${gameId}`);

let board = null;
let connection = null;
let legal = { spaces: [], materials: {} };
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
  else if (kind.value === "performance") options = ERAS.filter((era) => spaces.some((s) => s.eras.includes(era)));
  else options = FAMILIES;
  which.replaceChildren(...options.map((id) => new Option(nameOf(id), id)));
}

async function refreshLegal() {
  if (!board) return;
  try {
    legal = await getLegal(origin, gameId, token(), { skill: $("skill").value || "1", token: secret });
  } catch (error) {
    message.textContent = `Cannot ask where this token may go: ${error.code}: ${error.message}`;
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

async function place(spaceId) {
  const placed = token();
  if (!legal.spaces.includes(spaceId)) {
    message.textContent = `${describeToken(placed)} cannot go to ${board.spaceName(spaceId)}.`;
    return;
  }
  const placement = {
    token: placed,
    space: spaceId,
    skill: Number.parseInt($("skill").value, 10) || 1,
    consolation: $("consolation").value,
  };
  const needed = legal.materials[spaceId] || 0;
  if (needed) placement.materials = [$("material1").value, $("material2").value].slice(0, needed);
  delete message.dataset.code;
  message.textContent = `Placing ${describeToken(placed)} in ${board.spaceName(spaceId)}\u2026`;
  await answer(connection.place(placement));
}

async function answer(sent) {
  try {
    const accepted = await sent;
    message.textContent = `Accepted (version ${accepted.version}).`;
  } catch (error) {
    message.textContent = refusalWords(error);
    message.dataset.code = error.code;
  }
}

// An open seat: the page asks its player's name first (take_seat); the seat is theirs once accepted.
let mySeat = null;
let names = [];

function showMe() {
  if (mySeat === null) return;
  const name = names[mySeat];
  $("take-seat").hidden = name !== null && name !== undefined;
  if (name === null || name === undefined) {
    $("me").textContent = `Seat ${mySeat + 1}: give your name to play.`;
    return;
  }
  $("me").replaceChildren(document.createTextNode("You are "), el("span", `name seat-${mySeat % 4}`, name));
}

async function takeSeat(event) {
  event.preventDefault();
  const said = $("take-seat-message");
  const button = $("take-seat-button");
  button.disabled = true;
  said.textContent = "";
  delete said.dataset.code;
  try {
    await connection.takeSeat($("seat-name").value);
  } catch (error) {
    said.textContent = refusalWords(error);
    said.dataset.code = error.code;
  }
  button.disabled = false;
}

// "Take back" while this seat's placement is the game's last event (the server still decides).
function offerTakeBack() {
  const button = $("take-back");
  const placed = connection?.lastPlacement;
  button.hidden = !placed;
  button.disabled = false;
  if (!placed || !board) return;
  const what = `${describeToken(placed.event.token)} from ${board.spaceName(placed.event.space)}`;
  button.textContent = `Take back ${describeToken(placed.event.token, { short: true })}`;
  button.title = `Take back ${what}`;
  button.dataset.version = String(placed.version);
}

async function takeBack() {
  const placed = connection?.lastPlacement;
  if (!placed) return;
  $("take-back").disabled = true;
  const what = `${describeToken(placed.event.token)} from ${board.spaceName(placed.event.space)}`;
  message.textContent = `Taking back ${what}\u2026`;
  try {
    const accepted = await connection.takeBack({ expected_version: placed.version });
    message.textContent = `Took back ${what} (version ${accepted.version}).`;
  } catch (error) {
    message.textContent = refusalWords(error);
    message.dataset.code = error.code;
  }
  offerTakeBack();
}

function welcome(frame) {
  const seat = frame.seat;
  if (seat === null || seat === undefined) {
    $("me").textContent = "You are watching (this token has no seat).";
    return;
  }
  mySeat = seat;
  showMe();
  $("end-game").hidden = seat !== 0 || frame.view.ended;
}

if (!secret) {
  showError("This page needs your seat token in its address: /games/<id>/play#token=<your token>.");
} else {
  kind.addEventListener("change", () => {
    fillWhich();
    refreshLegal();
  });
  for (const id of ["which", "skill"]) $(id).addEventListener("change", refreshLegal);
  $("picker").addEventListener("submit", (event) => event.preventDefault());
  $("end-game").addEventListener("click", () => answer(connection.endGame()));
  $("take-back").addEventListener("click", takeBack);
  $("take-seat").addEventListener("submit", takeSeat);
  connection = await livePage({
    seats(now) {
      names = now;
      showMe();
    },
    board(made) {
      board = made;
      fillWhich();
      refreshLegal();
      board.root.addEventListener("click", (event) => {
        const cell = event.target.closest("[data-space]");
        if (cell) place(cell.dataset.space);
      });
    },
    welcome,
  });
  if (connection) {
    for (const name of ["events", "welcome", "close"]) connection.on(name, offerTakeBack);
    offerTakeBack();
  }
}
