// What the records' pages draw alike: a player's link, a game of the records, an error.

export function playerLink(name) {
  const link = document.createElement("a");
  link.href = `/records/players/${encodeURIComponent(name)}`;
  link.textContent = name;
  link.className = "name";
  return link;
}

export function gameItem(game) {
  const item = document.createElement("li");
  const when = document.createElement("span");
  when.className = "when";
  when.textContent = `${game.ended_at.slice(0, 16).replace("T", " ")} UTC, ${game.placements} placements`;
  const replay = document.createElement("a");
  replay.href = game.replay;
  replay.textContent = "replay";
  const seats = document.createElement("span");
  seats.className = "seats";
  for (const seat of [...game.players].sort((a, b) => (a.rank ?? 9) - (b.rank ?? 9))) {
    if (seat.name === null || seat.rank === null) continue;
    const one = document.createElement("span");
    one.append(`${seat.rank}. `, playerLink(seat.name), ` ${seat.prestige}`);
    seats.append(one);
  }
  item.append(when, replay, seats);
  return item;
}

export function showError(error) {
  const line = document.getElementById("error");
  line.textContent = error?.message ?? String(error);
  line.hidden = false;
}
