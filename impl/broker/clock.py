"""The broker's clock: monotonic milliseconds, never decreasing (as impl/share and traces require)."""

from __future__ import annotations

import time


def now_ms() -> int:
    return time.monotonic_ns() // 1_000_000
