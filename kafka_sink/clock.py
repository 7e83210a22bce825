"""Time as a parameter.

Every timing decision in the producer (linger, backoff, request and delivery timeouts, metadata
age) takes ``now_ms`` from a :class:`Clock` instead of reading the system clock itself, so tests can
step time with :class:`ManualClock` and never sleep.

Invariants: ``now_ms`` is monotonic (never goes backwards) and is only meaningful as a difference;
``wall_ms`` is the epoch time used for record timestamps and nothing else.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Monotonic milliseconds, for durations and deadlines."""
        ...

    def wall_ms(self) -> int:
        """Milliseconds since the Unix epoch, for record timestamps."""
        ...


class SystemClock:
    __slots__ = ()

    def now_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def __repr__(self) -> str:
        return "SystemClock()"


class ManualClock:
    """A clock that only moves when a test says so; safe to advance from another thread."""

    __slots__ = ("_lock", "_now_ms", "_wall_offset_ms")

    def __init__(self, now_ms: int = 0, wall_ms: int = 1_700_000_000_000) -> None:
        self._lock = threading.Lock()
        self._now_ms = now_ms
        self._wall_offset_ms = wall_ms - now_ms

    def now_ms(self) -> int:
        with self._lock:
            return self._now_ms

    def wall_ms(self) -> int:
        with self._lock:
            return self._now_ms + self._wall_offset_ms

    def advance(self, ms: int) -> int:
        if ms < 0:
            raise ValueError(f"a clock cannot go backwards (advance by {ms} ms)")
        with self._lock:
            self._now_ms += ms
            return self._now_ms

    def __repr__(self) -> str:
        return f"ManualClock(now_ms={self._now_ms})"


SYSTEM_CLOCK = SystemClock()
