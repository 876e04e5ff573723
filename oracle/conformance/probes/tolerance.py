"""Timers seen from outside: when a step's outcome cannot depend on exactly when a broker's lock fired.

A client never sees the broker's clock. It sees when it sent a request and
when the answer came back, on its own monotonic clock; the broker acted at some
instant between the two. A lock taken by an acquisition sent at S and answered
at R expires at some instant in [S + duration, R + duration] on the client's
clock, and the broker's timer may fire up to `tolerance_ms` late (or the
client's clock run that much apart over the lock's life). So every deadline is
only known to lie in a window

    [S + duration - tolerance_ms, R + duration + tolerance_ms].

The runner keeps every request out of every window (`fit` shortens a fetch's
wait to end before the next window, or sleeps past a window a request would
overlap), and records an acquisition at R (the
latest deadline the model may assume) and every other step at its send time.
A step whose round trip still overlapped a window (a slow answer) is
`ambiguous`: its run is inconclusive, never judged as a failure or a pass.
This is the timer tolerance of spec/conformance.md.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

DEFAULT_TOLERANCE_MS = 300
MIN_WAIT_MS = 200  # a shorter wait is not worth sending: sleep past the deadline window instead


class Ambiguous(Exception):
    """A request's round trip overlapped the window of a lock deadline: its outcome may go either way."""


@dataclass
class Timers:
    tolerance_ms: int = DEFAULT_TOLERANCE_MS
    windows: list[tuple[int, int]] = field(default_factory=list)  # [low, high] ms of possible deadlines
    origin: float = field(default_factory=time.monotonic)

    def now_ms(self) -> int:
        return int((time.monotonic() - self.origin) * 1000)

    def lock_taken(self, sent_ms: int, received_ms: int, duration_ms: int) -> tuple[int, int]:
        """A lock taken (or renewed) by a request sent at `sent_ms` and answered at `received_ms`: its deadline
        window [low, high], which no request may overlap from now on."""
        window = (sent_ms + duration_ms - self.tolerance_ms, received_ms + duration_ms + self.tolerance_ms)
        self.windows.append(window)
        return window

    def sleep_until(self, at_ms: int) -> None:
        """Sleep until the clock reads at least `at_ms`."""
        while (left := at_ms - self.now_ms()) > 0:
            time.sleep(left / 1000)

    def fit(self, wait_ms: int, slack_ms: int) -> int:
        """The wait (MaxWaitMs) a request may use if sent now, after sleeping past any deadline window it would
        overlap: `wait_ms` if it fits before the next window with `slack_ms` to spare for the round trip, less if
        at least MIN_WAIT_MS fits (an answer is never held past a deadline)."""
        while True:
            now = self.now_ms()
            ahead = [(low, high) for low, high in self.windows if high >= now]
            room = min(low for low, _ in ahead) - now - slack_ms if ahead else wait_ms
            if room >= wait_ms:
                return wait_ms
            if wait_ms and room >= MIN_WAIT_MS:
                return room
            until = max(high for low, high in ahead if low <= now + slack_ms + MIN_WAIT_MS)
            time.sleep((until - now + 1) / 1000)

    def after_all_deadlines(self) -> None:
        """Sleep past every known deadline window: every lock taken so far has fired."""
        self.sleep_until(max((high for _, high in self.windows), default=0) + 1)

    def check_clear(self, sent_ms: int, received_ms: int) -> None:
        """Raise Ambiguous when [sent_ms, received_ms] overlapped a deadline window."""
        for low, high in self.windows:
            if low <= received_ms and high >= sent_ms:
                raise Ambiguous(f"a request in flight from {sent_ms} to {received_ms} ms overlapped a lock deadline "
                                f"known only to within [{low}, {high}] ms")
