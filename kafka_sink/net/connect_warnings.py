"""Rate-limited warnings for connections that cannot be established, and their recovery.

Role: while a broker is unreachable, the network client dials it again after every reconnect
backoff (at most ``reconnect.backoff.max.ms``, one second by default), for as long as the process
lives. A warning per dial floods the log of a long-running process (an idle Spark worker whose
cluster is gone, a service whose broker is down for maintenance), so this decides, per node, which
failures are warned about and which are only logged at DEBUG.

Invariants:
- The first failure of a run (a node that never connected, or that was READY since its last
  failure) is a WARNING with the full message: node, address, reason.
- Repeats within :data:`WARN_INTERVAL_MS` of the last warning for that node are DEBUG; the first
  repeat after it is a WARNING with the latest message and how many failures it stands for, so
  at most one warning per node per interval, and no failure goes uncounted.
- A node that connects again after a warned run gets one INFO line saying so (and how long it was
  unreachable); its next failure starts a new run.
- A READY connection that is lost (:meth:`ConnectFailureLog.lost`) opens a run without a
  warning (the loss itself is an INFO line of the caller's); its first failed attempt is warned
  in full as any run's first, and the connection that ends the run gets one INFO line saying the
  node is reconnected: one line per recovery, however many attempts it took.
- Time is the caller's ``now_ms`` (testable with a manual clock); no locking: the network client
  calls this from its one I/O thread.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

__all__ = ["WARN_INTERVAL_MS", "ConnectFailureLog"]

#: At most one warning per node per this many ms while it stays unreachable.
WARN_INTERVAL_MS = 60_000


@dataclass
class _Run:
    """One node's current run of failed connection attempts."""

    first_ms: int
    warned_ms: int
    failures: int = 1
    unwarned: int = 0
    #: The run began with a READY connection lost, not a failed attempt.
    lost: bool = False


class ConnectFailureLog:
    """Which connection failures are warned about, per node (see the module docstring)."""

    def __init__(self, logger: logging.Logger, interval_ms: int = WARN_INTERVAL_MS) -> None:
        self._log = logger
        self._interval_ms = interval_ms
        self._runs: dict[int, _Run] = {}

    def failed(self, node_id: int, message: str, now_ms: int) -> None:
        """Log a failed attempt to connect to ``node_id``; ``message`` says where and why."""
        run = self._runs.get(node_id)
        if run is None or run.failures == 0:
            if run is None:
                self._runs[node_id] = _Run(first_ms=now_ms, warned_ms=now_ms)
            else:
                run.failures, run.warned_ms = 1, now_ms
            self._log.warning(
                "%s (while it stays unreachable, this is repeated at most every %d s)",
                message,
                self._interval_ms // 1000,
            )
            return
        run.failures += 1
        run.unwarned += 1
        if now_ms - run.warned_ms < self._interval_ms:
            self._log.debug("%s", message)
            return
        self._log.warning(
            "%s (%d more failed attempt(s) in the last %d s; unreachable for %d s)",
            message,
            run.unwarned,
            (now_ms - run.warned_ms) // 1000,
            (now_ms - run.first_ms) // 1000,
        )
        run.warned_ms = now_ms
        run.unwarned = 0

    def lost(self, node_id: int, now_ms: int) -> None:
        """``node_id``'s READY connection is gone: its reconnection will be reported."""
        run = self._runs.setdefault(node_id, _Run(first_ms=now_ms, warned_ms=now_ms, failures=0))
        run.lost = True

    def connected(self, node_id: int, where: str, now_ms: int) -> None:
        """``node_id`` is READY: end its run of failures (saying so if there was one)."""
        run = self._runs.pop(node_id, None)
        if run is None:
            return
        if run.lost:
            self._log.info(
                "%s reconnected %d ms after its connection was lost (%d failed attempt(s) in "
                "between)",
                where,
                now_ms - run.first_ms,
                run.failures,
            )
            return
        self._log.info(
            "%s is reachable again after %d failed attempt(s) over %d s",
            where,
            run.failures,
            (now_ms - run.first_ms) // 1000,
        )
