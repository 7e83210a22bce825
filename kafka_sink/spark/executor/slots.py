"""Which transactional id an exactly-once task attempt takes: a free slot of its partition.

Role: each Spark partition ``p`` of a write has :data:`SLOTS_PER_PARTITION` transactional ids,
``<prefix>-<p>-<slot>`` (``plan.transactional_id``). Before its InitProducerId, which would
abort whatever transaction the id holds open, a task attempt asks the coordinators for the
state of its partition's ids in one round (:func:`describe_states`: one FindCoordinator for
all, one DescribeTransactions per coordinator) and takes a free one (:func:`choose_slot`).
Spark's attempt number alone cannot name an attempt: it restarts at 0 when a stage is
re-attempted while tasks of the earlier stage attempt (or of an earlier run of the query) may
still run, and PySpark exposes no stage attempt number.

- A slot is busy when its transaction is Ongoing, PrepareCommit, PrepareAbort or
  PrepareEpochFence: another attempt holds it open (possibly prepared, awaiting the driver).
- Empty, CompleteCommit, CompleteAbort and an id the coordinator does not know are free. An
  attempt that initialised an id but has not written yet holds nothing: if another attempt
  takes the id, the first is fenced at its first write and fails, and Spark retries it.
- The attempt number's slot (``attempt_number % SLOTS_PER_PARTITION``) is tried first, then the
  others in ascending order, so the usual case keeps one id per partition and finds the
  worker's cached producer of that id warm. When that slot's transaction is being ended
  (PrepareCommit, PrepareAbort, PrepareEpochFence: the previous batch's commit still writing
  its markers), the attempt asks again for up to ``sum(ENDING_RECHECK_MS)`` ms before taking
  another slot.

Invariants:
- :func:`choose_slot` is pure; a slot it returns was free in the states given.
- A task never takes a busy slot: with all slots busy it fails with :class:`SlotsBusyError`
  naming the partition and every id (Spark retries the task).
- One :class:`~kafka_sink.admin.transactions.TransactionAdmin` per Python worker process and
  cluster config (at most ``_MAX_ADMINS``, least recently used closed first), kept open between
  tasks like the producer cache keeps producers; closed at exit, and dropped after a failed
  round so the next task starts afresh. The key holds secrets; it is never logged.
- Only a test leaves the choice out (``fault_hooks.safeguards``, never changed by the package):
  every slot then counts as free without asking, to show what the choice prevents.
- Against brokers without DescribeTransactions (before Kafka 3.0) every slot counts as free
  (the attempt number's slot is taken, as before slots existed), with one warning.
"""

from __future__ import annotations

import atexit
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence

from kafka_sink.admin.transactions import TransactionAdmin
from kafka_sink.errors import UnsupportedVersionError
from kafka_sink.sink_errors import SlotsBusyError
from kafka_sink.spark import fault_hooks
from kafka_sink.spark.eos_plan import SLOTS_PER_PARTITION, transactional_id
from kafka_sink.spark.logs import ensure_logging, logger

__all__ = [
    "BUSY_STATES",
    "ENDING_RECHECK_MS",
    "ENDING_STATES",
    "SLOTS_PER_PARTITION",
    "SlotsBusyError",
    "choose_slot",
    "claim_transactional_id",
    "close_admins",
    "describe_states",
    "slot_order",
]

#: Transaction states in which another attempt holds the id (InitProducerId would abort it).
BUSY_STATES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})
#: Busy states that end by themselves within moments (the coordinator writes the markers).
ENDING_STATES = BUSY_STATES - {"Ongoing"}
#: Pauses before asking again while the attempt's own slot is ending: the driver's EndTxn
#: returns at PrepareCommit, so the next micro-batch's task may find its previous transaction
#: still writing markers; waiting a little keeps its id (and its warm producer).
ENDING_RECHECK_MS = (10, 20, 50, 100, 200)

_MAX_ADMINS = 4
_sleep = time.sleep  # tests step a manual clock instead
_ConfigKey = tuple[tuple[str, str], ...]


def slot_order(attempt_number: int) -> list[int]:
    """The slots an attempt tries, in order: its attempt number's first, then ascending."""
    if attempt_number < 0:
        raise ValueError(f"attempt number must be >= 0, got {attempt_number}")
    first = attempt_number % SLOTS_PER_PARTITION
    return [first, *(s for s in range(SLOTS_PER_PARTITION) if s != first)]


def choose_slot(attempt_number: int, states: Sequence[str | None]) -> int | None:
    """The first free slot in :func:`slot_order`; None when every slot is busy.

    ``states[slot]`` is the slot's transaction state as DescribeTransactions names it, None
    for an id the coordinator does not know.
    """
    if len(states) != SLOTS_PER_PARTITION:
        raise ValueError(f"expected {SLOTS_PER_PARTITION} slot states, got {len(states)}")
    for slot in slot_order(attempt_number):
        if states[slot] not in BUSY_STATES:
            return slot
    return None


# -- the coordinators' view, through one admin per worker process and cluster config ------------

_lock = threading.Lock()
_admins: OrderedDict[_ConfigKey, tuple[TransactionAdmin, threading.Lock]] = OrderedDict()
_warned_unsupported: list[bool] = []


def _admin(key: _ConfigKey) -> tuple[TransactionAdmin, threading.Lock]:
    stale: list[TransactionAdmin] = []
    with _lock:
        entry = _admins.get(key)
        if entry is None:
            entry = (TransactionAdmin(dict(key)), threading.Lock())
            _admins[key] = entry
        _admins.move_to_end(key)
        while len(_admins) > _MAX_ADMINS:
            stale.append(_admins.popitem(last=False)[1][0])
    for admin in stale:
        admin.close()
    return entry


def _drop(key: _ConfigKey, admin: TransactionAdmin) -> None:
    with _lock:
        entry = _admins.get(key)
        if entry is not None and entry[0] is admin:
            del _admins[key]
    admin.close()


def describe_states(config: Mapping[str, str], ids: Sequence[str]) -> list[str | None]:
    """The transaction state of each id (None: unknown to its coordinator), in one round.

    ``config`` is the write's producer config; the call is bounded by its ``max.block.ms``.
    """
    if not fault_hooks.safeguards.slot_choice:  # only a test leaves it out; see fault_hooks
        return [None] * len(ids)
    key = tuple(sorted((k, v) for k, v in config.items() if k != "transactional.id"))
    admin, in_use = _admin(key)
    try:
        with in_use:  # an admin client is not thread-safe
            found = admin.describe(ids)
    except UnsupportedVersionError:
        if not _warned_unsupported:
            _warned_unsupported.append(True)
            ensure_logging()
            logger.warning(
                "exactly-once: the brokers do not support DescribeTransactions (Kafka 3.0+), "
                "so a task cannot tell which of its partition's transactional ids another "
                "attempt holds open; each task uses its attempt number's id, and a stage "
                "re-attempt may fence a still running task of the earlier stage attempt"
            )
        return [None] * len(ids)
    except BaseException:
        _drop(key, admin)
        raise
    return [None if (listing := found[t]) is None else listing.state for t in ids]


def close_admins() -> None:
    """Close every cached admin client (at interpreter exit, and in tests)."""
    with _lock:
        admins = [admin for admin, _in_use in _admins.values()]
        _admins.clear()
    for admin in admins:
        admin.close()


atexit.register(close_admins)


def claim_transactional_id(
    config: Mapping[str, str], prefix: str, partition_id: int, attempt_number: int
) -> str:
    """The id a task attempt of Spark partition ``partition_id`` takes: a free slot's.

    Raises :class:`SlotsBusyError` when every slot is busy.
    """
    ids = [transactional_id(prefix, partition_id, s) for s in range(SLOTS_PER_PARTITION)]
    preferred = slot_order(attempt_number)[0]
    states = describe_states(config, ids)
    for pause_ms in ENDING_RECHECK_MS:
        if states[preferred] not in ENDING_STATES:
            break
        _sleep(pause_ms / 1000)
        states = describe_states(config, ids)
    slot = choose_slot(attempt_number, states)
    if slot is None:
        held = ", ".join(f"{t} ({state})" for t, state in zip(ids, states, strict=True))
        raise SlotsBusyError(
            f"exactly-once: every transactional id of Spark partition {partition_id} is held "
            f"open by another task attempt: {held}. Spark retries the task; if this persists, "
            "other attempts (of this write or of an earlier run of it, or another write given "
            "the same transactionalIdPrefix) keep those transactions open: wait for them to "
            "end (at most kafka.transaction.timeout.ms) or abort the open transactions of the "
            "prefix, and make sure no two writes share a transactionalIdPrefix"
        )
    if slot != preferred:
        ensure_logging()
        logger.info(
            "task %d (attempt %d): transactional id %s is held open by another attempt (%s); "
            "using %s",
            partition_id,
            attempt_number,
            ids[preferred],
            states[preferred],
            ids[slot],
        )
    return ids[slot]
