"""Progress of a long operator command (archive, import or verify many games) and its summary.

On a terminal (stderr is a tty) a one-line bar is redrawn in place, at most ten times a second; anywhere
else (a log, a pipe, CI) each item gets one plain line on stderr, so the output reads as a record of what
was done. Reports (the failures, a new token) go to stdout above the bar; the summary ends the run.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from enum import Enum
from typing import TextIO

# Exit statuses of a bulk command: everything succeeded, something failed, interrupted (128 + SIGINT).
ALL_DONE = 0
SOME_FAILED = 1
INTERRUPTED = 130

_REDRAW_SECONDS = 0.1


class Outcome(Enum):
    """What became of one item."""

    DONE = "done"
    SKIPPED = "skipped"
    FAILED = "failed"


class Progress:
    """The items of one bulk command done so far, shown as they go."""

    def __init__(
        self,
        verb: str,
        *,
        done_word: str,
        total: int = 0,
        stream: TextIO | None = None,
        out: TextIO | None = None,
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`verb` names the command ("archive"), `done_word` what a done item is ("archived"); progress
        goes to `stream` (stderr), reports and the summary to `out` (stdout)."""
        self.verb, self.total, self.done_word = verb, total, done_word
        self._stream = stream if stream is not None else sys.stderr
        self._out = out if out is not None else sys.stdout
        self.tty = self._stream.isatty() if tty is None else tty
        self._clock = clock
        self._started = clock()
        self._drawn_at = -1.0
        self._drawn = False
        self.counts = {outcome: 0 for outcome in Outcome}
        self.interrupted = False
        self._finished = False

    def begin(self, total: int) -> None:
        """The number of items is known: the clock starts."""
        self.total = total
        self._started = self._clock()

    @property
    def handled(self) -> int:
        """Items done, skipped or failed so far."""
        return sum(self.counts.values())

    def step(self, name: str, outcome: Outcome, message: str) -> None:
        """One more item: `name` came to `outcome`, said by `message`."""
        self.counts[outcome] += 1
        if self.tty:
            self._draw(force=self.handled == self.total)
        else:
            self._line(self._stream, f"[{self.handled}/{self.total}] {name}: {message}")

    def report(self, text: str) -> None:
        """A line of the command's results (stdout), above the bar on a terminal."""
        self._line(self._out, text)

    def note(self, text: str) -> None:
        """A line about the run itself (stderr), above the bar on a terminal."""
        self._line(self._stream, text)

    def exit_status(self) -> int:
        """INTERRUPTED, else SOME_FAILED when an item failed, else ALL_DONE."""
        if self.interrupted:
            return INTERRUPTED
        return SOME_FAILED if self.counts[Outcome.FAILED] else ALL_DONE

    def finish(self) -> int:
        """End the bar, print the summary (stdout) and return the exit status."""
        if self.tty:
            self._draw(force=True)
            self._stream.write("\n")
            self._stream.flush()
            self._drawn = False
        self._finished = True
        self._line(self._out, self.summary())
        return self.exit_status()

    def summary(self) -> str:
        """The run in one line: how many items came to what, how long it took."""
        elapsed = self._clock() - self._started
        rate = self.handled / elapsed if elapsed > 0 else 0.0
        text = (
            f"{self.verb}: {self.counts[Outcome.DONE]} {self.done_word}, {self.counts[Outcome.SKIPPED]} "
            f"skipped, {self.counts[Outcome.FAILED]} failed, of {self.total} in {elapsed:.1f} s "
            f"({rate:.1f}/s)"
        )
        if self.interrupted:
            text += (
                f"; interrupted with {self.total - self.handled} not done: run the same command again to "
                "resume"
            )
        return text

    def _line(self, stream: TextIO, text: str) -> None:
        if self._drawn:
            self._stream.write("\r\x1b[K")  # clear the bar; it is drawn again below the line
            self._stream.flush()
            self._drawn = False
        stream.write(text + "\n")
        stream.flush()
        if self.tty and self.handled and not self._finished:
            self._draw(force=True)

    def _draw(self, *, force: bool = False) -> None:
        now = self._clock()
        if not force and now - self._drawn_at < _REDRAW_SECONDS:
            return
        self._drawn_at = now
        elapsed = now - self._started
        done = self.handled
        rate = done / elapsed if elapsed > 0 else 0.0
        suffix = f" {done}/{self.total}"
        if self.counts[Outcome.FAILED]:
            suffix += f", {self.counts[Outcome.FAILED]} failed"
        if rate and done < self.total:
            suffix += f", {rate:.1f}/s, {(self.total - done) / rate:.0f} s left"
        width = max(
            10, min(40, shutil.get_terminal_size((80, 24)).columns - len(self.verb) - len(suffix) - 4)
        )
        filled = width * done // self.total if self.total else width
        bar = "#" * filled + "." * (width - filled)
        self._stream.write(f"\r\x1b[K{self.verb} [{bar}]{suffix}")
        self._stream.flush()
        self._drawn = True
