"""The transactional-id scheme of exactly-once writes (ids, the slot an attempt takes) and the
local intent stores."""

from __future__ import annotations

import itertools
import pickle
from pathlib import Path

import pytest

from kafka_sink.prepared import PreparedTransaction
from kafka_sink.spark.driver.eos.intents import (
    DONE,
    INTENT,
    BatchRecord,
    FileIntentStore,
    MemoryIntentStore,
)
from kafka_sink.spark.eos_plan import default_prefix, parse_transactional_id, transactional_id
from kafka_sink.spark.executor.slots import (
    BUSY_STATES,
    SLOTS_PER_PARTITION,
    choose_slot,
    slot_order,
)


def test_ids_round_trip() -> None:
    for partition, slot in itertools.product(range(12), range(5)):
        tid = transactional_id("q", partition, slot)
        assert parse_transactional_id("q", tid) == (partition, slot)


def test_ids_are_reused_from_batch_to_batch_so_the_set_is_bounded() -> None:
    # The batch id is not part of the id: 10,000 batches of 4 partitions, no retries, 4 ids.
    ids = {transactional_id("q", p, 0) for _batch in range(10_000) for p in range(4)}
    assert len(ids) == 4


# -- the slot a task attempt takes ---------------------------------------------------------------

K = SLOTS_PER_PARTITION
ALL_STATES = (
    None,
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "PrepareEpochFence",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
)
FREE_STATES = (None, "Empty", "CompleteCommit", "CompleteAbort", "Dead")


def test_the_slot_count_is_eight_and_the_busy_states_are_the_open_ones() -> None:
    assert K == 8
    assert {"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"} == BUSY_STATES
    assert set(ALL_STATES) - BUSY_STATES == set(FREE_STATES)


def test_the_attempt_numbers_slot_comes_first_then_the_others_ascending() -> None:
    assert slot_order(0) == [0, 1, 2, 3, 4, 5, 6, 7]
    assert slot_order(3) == [3, 0, 1, 2, 4, 5, 6, 7]
    assert slot_order(K + 2) == [2, 0, 1, 3, 4, 5, 6, 7]
    with pytest.raises(ValueError, match="attempt number"):
        slot_order(-1)


@pytest.mark.parametrize("attempt", range(2 * K + 1))
def test_choose_slot_over_every_busy_pattern(attempt: int) -> None:
    # Every subset of busy slots, for attempt numbers past K too: the first free slot in the
    # attempt's order, never a busy one, None only when all are busy.
    for busy in itertools.product((False, True), repeat=K):
        states = ["Ongoing" if b else "CompleteCommit" for b in busy]
        chosen = choose_slot(attempt, states)
        free = [s for s in slot_order(attempt) if not busy[s]]
        assert chosen == (free[0] if free else None)


@pytest.mark.parametrize("state", ALL_STATES)
def test_choose_slot_reads_each_state_as_busy_or_free(state: str | None) -> None:
    states: list[str | None] = ["Ongoing"] * K
    states[5] = state
    assert choose_slot(0, states) == (None if state in BUSY_STATES else 5)
    # The attempt's own slot wins whenever it is free, whatever the others hold.
    own: list[str | None] = ["PrepareCommit"] * K
    own[2] = state
    assert choose_slot(2, own) == (None if state in BUSY_STATES else 2)


def test_choose_slot_refuses_a_wrong_number_of_states() -> None:
    with pytest.raises(ValueError, match="8 slot states"):
        choose_slot(0, [None] * (K - 1))


def test_ids_of_other_prefixes_do_not_parse() -> None:
    assert parse_transactional_id("q", "q2-0-0") is None  # a prefix that starts with ours
    assert parse_transactional_id("q", "q-0-0-0") is None
    assert parse_transactional_id("q", "q-01-0") is None
    assert parse_transactional_id("q", "other-0-0") is None
    assert parse_transactional_id("q-1", "q-1-2-3") == (2, 3)


def test_default_prefix_names_the_query() -> None:
    assert default_prefix("6b1c") == "pykafka-6b1c"


def test_negative_parts_are_refused() -> None:
    with pytest.raises(ValueError):
        transactional_id("q", -1, 0)


def _record(batch: int, state: str) -> BatchRecord:
    txn = PreparedTransaction("q-0-0", 7, 3, (("t", 1), ("t", 0)))
    return BatchRecord("query-1", batch, state, (txn,), {"k": "v"})


@pytest.mark.parametrize("make", [MemoryIntentStore, "file"])
def test_stores_keep_the_latest_record_per_query(make: object, tmp_path: Path) -> None:
    store = MemoryIntentStore() if make is MemoryIntentStore else FileIntentStore(str(tmp_path))
    assert store.last("query-1") is None
    store.write(_record(4, INTENT))
    assert store.last("query-1") == _record(4, INTENT)
    store.write(_record(4, DONE))
    assert store.last("query-1") == _record(4, DONE)
    assert store.last("query-2") is None
    store.close()


def test_file_store_reads_back_in_a_new_instance(tmp_path: Path) -> None:
    FileIntentStore(str(tmp_path)).write(_record(9, INTENT))
    assert FileIntentStore(str(tmp_path)).last("query-1") == _record(9, INTENT)
    assert [p.name for p in tmp_path.iterdir()] == ["query-1.json"]  # no temp file left


def test_records_pickle_and_refuse_unknown_states() -> None:
    assert pickle.loads(pickle.dumps(_record(1, DONE))) == _record(1, DONE)
    with pytest.raises(ValueError, match="state"):
        BatchRecord("q", 1, "committed", ())
