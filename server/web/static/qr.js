// QR codes drawn in the page (a canvas), by the vendored qrcode-generator (vendor/, MIT): a link that holds
// a token is never sent to a server to be drawn.

import qrcode from "./vendor/qrcode-generator.mjs";

// The quiet zone the QR standard asks for around the code, in modules.
const QUIET = 4;

/** Draw `text` as a QR code on `canvas`, at least `min` CSS pixels wide: whole device pixels per module
 * (sharp edges for a phone's camera), black on white, with its quiet zone. */
export function drawQr(canvas, text, { min = 232 } = {}) {
  const code = qrcode(0, "M");
  code.addData(text, "Byte");
  code.make();
  const count = code.getModuleCount();
  const cells = count + 2 * QUIET;
  const scale = Math.max(1, Math.ceil(min / cells));
  const ratio = Math.max(1, Math.round(window.devicePixelRatio || 1));
  const side = cells * scale;
  canvas.width = side * ratio;
  canvas.height = side * ratio;
  canvas.style.width = `${side}px`;
  canvas.style.height = `${side}px`;
  const context = canvas.getContext("2d");
  const cell = scale * ratio;
  context.fillStyle = "#fff";
  context.fillRect(0, 0, canvas.width, canvas.height);
  context.fillStyle = "#000";
  for (let row = 0; row < count; row += 1) {
    for (let col = 0; col < count; col += 1) {
      if (code.isDark(row, col)) context.fillRect((col + QUIET) * cell, (row + QUIET) * cell, cell, cell);
    }
  }
  canvas.dataset.text = text;
  canvas.setAttribute("role", "img");
  canvas.setAttribute("aria-label", "QR code of the link above");
  return canvas;
}
