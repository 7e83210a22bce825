"""Which transactional id a task attempt takes, against a model of the coordinator.

The coordinator model (``tests/fakes/coordinator.py``, the one the driver's commit is tested
against) aborts an id's open transaction on InitProducerId, as Kafka's does;
``slots.describe_states`` is answered from it.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

import pyarrow as pa
import pytest

from kafka_sink.admin.transactions import TransactionListing
from kafka_sink.clock import ManualClock
from kafka_sink.errors import KafkaTimeoutError, ProducerFencedError, UnsupportedVersionError
from kafka_sink.prepared import PreparedTransaction
from kafka_sink.sink_errors import SlotsBusyError
from kafka_sink.spark import fault_hooks
from kafka_sink.spark.eos_plan import parse_transactional_id
from kafka_sink.spark.executor import producer_cache, slots
from kafka_sink.spark.executor import task as task_module
from kafka_sink.spark.executor.slots import SLOTS_PER_PARTITION
from kafka_sink.spark.options import SinkOptions
from tests.fakes.coordinator import (
    CoordinatedProducer,
    FakeCoordinator,
    coordinator_ops,
    install_coordinated_tasks,
)

PREFIX = "pykafka-q"


@pytest.fixture
def coordinator(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCoordinator]:
    model = FakeCoordinator()
    install_coordinated_tasks(monkeypatch, model)
    yield model
    producer_cache.close_all()


def _options(**extra: str) -> SinkOptions:
    return SinkOptions.from_options(
        {
            "kafka.bootstrap.servers": "h:1",
            "topic": "t",
            "deliveryGuarantee": "exactly-once",
            **extra,
        }
    )


def _strategy() -> task_module._ExactlyOnce:
    return task_module._ExactlyOnce(_options(), PREFIX)


def _rows(name: str, n: int) -> pa.Array:
    return pa.array([f"{name}-{i}".encode() for i in range(n)], pa.binary())


def _info(partition: int, attempt: int, task_attempt_id: int = 0) -> task_module._TaskInfo:
    return task_module._TaskInfo(partition, attempt, task_attempt_id, 7)


def _tid(partition: int, slot: int) -> str:
    return f"{PREFIX}-{partition}-{slot}"


def _end(coordinator: FakeCoordinator, prepared: PreparedTransaction, *, commit: bool) -> None:
    """The driver's EndTxn (a commit Kafka lost raises ``TransactionLostError``)."""
    coordinator_ops(coordinator).complete(prepared, commit)


def _visible(coordinator: FakeCoordinator) -> list[object]:
    """What a read_committed reader sees of topic ``t`` (every row is on its partition 0)."""
    return coordinator.read_committed().get(("t", 0), [])


def test_a_zombie_of_an_earlier_stage_attempt_leaves_the_re_runs_prepared_transaction_alone(
    coordinator: FakeCoordinator,
) -> None:
    # Stage attempt 1's task for partition 3 (attempt 0) runs while stage attempt 0's task for
    # partition 3 (attempt 0 too) still runs: the re-run prepares, then the zombie acquires.
    strategy = _strategy()
    rerun = strategy.acquire(_info(3, 0, 20))
    rerun.send_columns("t", _rows("rerun", 4)).get()
    prepared = rerun.prepare_transaction()
    zombie = strategy.acquire(_info(3, 0, 10))
    zombie.send_columns("t", _rows("zombie", 2)).get()
    zombie_prepared = zombie.prepare_transaction()
    assert (prepared.transactional_id, zombie_prepared.transactional_id) == (
        _tid(3, 0),
        _tid(3, 1),
    )
    # The driver gets the re-run's message: it commits it and aborts what nothing names.
    _end(coordinator, prepared, commit=True)
    _end(coordinator, zombie_prepared, commit=False)
    assert _visible(coordinator) == _rows("rerun", 4).to_pylist()
    assert coordinator.open_transactions() == []


def test_the_usual_attempt_keeps_its_attempt_numbers_id_and_asks_once_for_all_eight(
    coordinator: FakeCoordinator,
) -> None:
    strategy = _strategy()
    for batch in range(3):  # each batch's transaction committed before the next starts
        producer = strategy.acquire(_info(2, 0))
        producer.send_columns("t", _rows(f"b{batch}", 1)).get()
        _end(coordinator, producer.prepare_transaction(), commit=True)
        producer_cache.release(producer)
    assert len(CoordinatedProducer.instances) == 1  # one id, its producer kept warm
    assert coordinator.ever_used == {_tid(2, 0)}
    assert coordinator.describes == [tuple(_tid(2, s) for s in range(SLOTS_PER_PARTITION))] * 3


def test_a_retry_whose_own_slot_is_held_takes_the_first_free_one(
    coordinator: FakeCoordinator,
) -> None:
    strategy = _strategy()
    for slot in (1, 0):  # attempts of an earlier stage attempt hold slots 1 and 0 open
        held = strategy.acquire(_info(4, slot))
        held.send_columns("t", _rows(f"held{slot}", 1)).get()
    retry = strategy.acquire(_info(4, 1))
    assert retry.tid == _tid(4, 2)
    assert coordinator.open_transactions() == [_tid(4, 0), _tid(4, 1)]  # neither was aborted


def test_an_id_initialised_but_not_written_to_is_free_and_its_attempt_fails_cleanly(
    coordinator: FakeCoordinator,
) -> None:
    strategy = _strategy()
    slow = strategy.acquire(_info(0, 0, 1))  # initialised (Empty), no record sent yet
    fast = strategy.acquire(_info(0, 0, 2))
    assert slow is fast  # same id, same worker's producer here: what matters is the coordinator
    assert fast.tid == _tid(0, 0)
    # In two workers the slow one's next write is fenced: a task failure Spark retries.
    coordinator.init_producer_id(_tid(0, 0))
    with pytest.raises(ProducerFencedError):
        slow.send_columns("t", _rows("slow", 1)).get()
    assert _visible(coordinator) == []


def test_every_slot_held_fails_the_task_naming_the_partition_and_the_ids(
    coordinator: FakeCoordinator,
) -> None:
    strategy = _strategy()
    for slot in range(SLOTS_PER_PARTITION):
        held = strategy.acquire(_info(6, slot))
        held.send_columns("t", _rows(f"held{slot}", 1)).get()
    inits = len(CoordinatedProducer.instances)
    with pytest.raises(SlotsBusyError) as caught:
        strategy.acquire(_info(6, 0))
    message = str(caught.value)
    assert "Spark partition 6" in message and "transactionalIdPrefix" in message
    for slot in range(SLOTS_PER_PARTITION):
        assert f"{_tid(6, slot)} (Ongoing)" in message
    assert len(CoordinatedProducer.instances) == inits  # no InitProducerId: nothing aborted
    assert len(coordinator.open_transactions()) == SLOTS_PER_PARTITION


def test_a_whole_write_fails_before_any_producer_when_all_slots_are_held(
    coordinator: FakeCoordinator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(slots, "describe_states", lambda config, ids: ["PrepareCommit"] * len(ids))
    layout = task_module.InputLayout(
        topic_column=False,
        key_column=False,
        partition_column=False,
        headers_column=False,
        timestamp=None,
    )
    eos = task_module.EosPlan(PREFIX, "q", None)
    batches = iter([pa.record_batch({"value": _rows("r", 2)})])
    with pytest.raises(SlotsBusyError):
        task_module.write_task(_options(), layout, batches, streaming=False, eos=eos)
    assert CoordinatedProducer.instances == [] and producer_cache.cached_count() == 0


# -- the admin behind describe_states ------------------------------------------------------------


class _FakeAdmin:
    made: ClassVar[list[_FakeAdmin]] = []
    answer: ClassVar[Any] = None

    def __init__(self, config: Mapping[str, object], timeout: float | None = None) -> None:
        self.config = dict(config)
        self.closed = False
        self.calls: list[list[str]] = []
        _FakeAdmin.made.append(self)

    def describe(self, ids: Sequence[str]) -> dict[str, TransactionListing | None]:
        self.calls.append(list(ids))
        if isinstance(_FakeAdmin.answer, BaseException):
            raise _FakeAdmin.answer
        return {t: _FakeAdmin.answer(t) for t in ids}

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def fake_admin(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_FakeAdmin]]:
    slots.close_admins()
    _FakeAdmin.made = []
    _FakeAdmin.answer = lambda t: (
        None if t.endswith("-0") else TransactionListing(t, 1, 2, "Ongoing", (), 0)
    )
    monkeypatch.setattr(slots, "TransactionAdmin", _FakeAdmin)
    yield _FakeAdmin
    slots.close_admins()


def test_one_admin_per_worker_and_cluster_config_serves_every_task(
    fake_admin: type[_FakeAdmin],
) -> None:
    config = {"bootstrap.servers": "h:1", "sasl.password": "hunter2"}
    ids = ["p-0-0", "p-0-1"]
    for _task in range(3):
        assert slots.describe_states({**config, "transactional.id": "p-0-0"}, ids) == [
            None,
            "Ongoing",
        ]
    [admin] = fake_admin.made
    assert admin.calls == [ids] * 3
    assert "transactional.id" not in admin.config
    slots.describe_states({"bootstrap.servers": "other:1"}, ids)  # another cluster: another
    assert len(fake_admin.made) == 2
    slots.close_admins()
    assert all(a.closed for a in fake_admin.made)


def test_a_failed_round_drops_the_admin_and_raises(fake_admin: type[_FakeAdmin]) -> None:
    fake_admin.answer = KafkaTimeoutError("describe did not finish within 60000 ms")
    with pytest.raises(KafkaTimeoutError):
        slots.describe_states({"bootstrap.servers": "h:1"}, ["p-0-0"])
    assert fake_admin.made[0].closed
    fake_admin.answer = lambda t: None
    assert slots.describe_states({"bootstrap.servers": "h:1"}, ["p-0-0"]) == [None]
    assert len(fake_admin.made) == 2


def test_brokers_without_describe_transactions_fall_back_to_the_attempt_number(
    fake_admin: type[_FakeAdmin], caplog: pytest.LogCaptureFixture
) -> None:
    fake_admin.answer = UnsupportedVersionError("DescribeTransactions")
    slots._warned_unsupported.clear()
    config = {"bootstrap.servers": "h:1"}
    assert slots.claim_transactional_id(config, "p", 1, 3) == "p-1-3"
    assert slots.claim_transactional_id(config, "p", 1, 3) == "p-1-3"
    warnings = [r for r in caplog.records if "DescribeTransactions" in r.getMessage()]
    assert len(warnings) == 1


def test_a_test_installed_weakening_makes_every_slot_look_free_without_asking(
    fake_admin: type[_FakeAdmin], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fault_hooks, "safeguards", fault_hooks.Safeguards(slot_choice=False))
    assert slots.describe_states({"bootstrap.servers": "h:1"}, ["p-0-0", "p-0-1"]) == [None] * 2
    assert fake_admin.made == []
    monkeypatch.setattr(fault_hooks, "safeguards", fault_hooks.Safeguards())
    assert slots.describe_states({"bootstrap.servers": "h:1"}, ["p-0-0", "p-0-1"]) == [
        None,
        "Ongoing",
    ]


# -- the ids a long-running query uses -----------------------------------------------------------


def test_an_hour_of_one_second_triggers_with_retries_and_stage_re_attempts_stays_bounded(
    coordinator: FakeCoordinator,
) -> None:
    # 64 tasks a batch, 3600 batches on the manual clock. Now and then a task fails after
    # writing (its transaction left open: the driver's sweep aborts it at the commit, or the
    # broker after transaction.timeout.ms) and is retried; now and then a stage is re-attempted
    # while some tasks of the first stage attempt still run (attempt numbers restart at 0, and
    # the zombies write into open transactions the driver never commits). Every batch's winners
    # commit, nothing is lost, and the ids stay within 64 x K.
    rng = random.Random(20240611)
    clock = ManualClock()
    timeout_ms = 60_000
    tasks, batches = 64, 3600
    lingering: dict[str, int] = {}  # id -> when the broker times its open transaction out
    expected: list[bytes] = []
    retries = re_attempts = 0

    def claim(partition: int, attempt: int) -> str:
        tid = slots.claim_transactional_id({}, PREFIX, partition, attempt)
        coordinator.init_producer_id(tid)
        return tid

    def write(tid: str, row: bytes) -> None:
        current = coordinator.txns[tid]
        coordinator.write(tid, current.producer_id, current.producer_epoch, ("t", 0), row)

    for batch in range(batches):
        for tid, due in list(lingering.items()):
            if due <= clock.now_ms():
                coordinator.time_out(tid)
                del lingering[tid]
        winners: list[str] = []
        zombies: list[str] = []
        stage_re_attempt = rng.random() < 0.01
        re_attempts += stage_re_attempt
        for partition in range(tasks):
            attempt = 0
            if rng.random() < 0.005:  # fails after writing, then retried
                failed = claim(partition, attempt)
                write(failed, b"failed")
                lingering[failed] = clock.now_ms() + timeout_ms
                attempt, retries = 1, retries + 1
            if stage_re_attempt and rng.random() < 0.25:
                zombie = claim(partition, 0)  # of the first stage attempt, still running
                write(zombie, b"zombie")
                zombies.append(zombie)
                attempt = 0
            tid = claim(partition, attempt)
            row = f"{batch}-{partition}".encode()
            write(tid, row)
            expected.append(row)
            winners.append(tid)
        for tid in winners:
            current = coordinator.txns[tid]
            prepared = task_module.PreparedTransaction(
                tid, current.producer_id, current.producer_epoch, (("t", 0),)
            )
            _end(coordinator, prepared, commit=True)  # raises if a later attempt aborted it
        if rng.random() < 0.5:  # the sweep ends the zombies; else the broker times them out
            for tid in zombies:
                current = coordinator.txns[tid]
                _end(
                    coordinator,
                    task_module.PreparedTransaction(
                        tid, current.producer_id, current.producer_epoch, ()
                    ),
                    commit=False,
                )
        else:
            lingering.update({tid: clock.now_ms() + timeout_ms for tid in zombies})
        clock.advance(1000)

    assert retries > 0 and re_attempts > 0
    assert sorted(_visible(coordinator)) == sorted(expected)  # every row once, none lost
    used = coordinator.ever_used
    assert all(parse_transactional_id(PREFIX, t) is not None for t in used)
    assert len(used) <= tasks * SLOTS_PER_PARTITION


def test_an_own_slot_still_being_committed_is_waited_for_then_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The driver's EndTxn returned at PrepareCommit; the next batch's task asks before the
    # markers are written: it asks again shortly and keeps its id (and warm producer).
    clock = ManualClock()
    answers = [["PrepareCommit"] + [None] * 7, ["PrepareCommit"] + [None] * 7]
    asked: list[int] = []

    def describe(config: Mapping[str, str], ids: Sequence[str]) -> list[str | None]:
        asked.append(clock.now_ms())
        return answers.pop(0) if answers else ["CompleteCommit"] + [None] * 7

    monkeypatch.setattr(slots, "describe_states", describe)
    monkeypatch.setattr(slots, "_sleep", lambda s: clock.advance(int(s * 1000)))
    assert slots.claim_transactional_id({}, "p", 0, 0) == "p-0-0"
    assert asked == [0, 10, 30]


def test_an_own_slot_that_stays_ending_is_left_after_a_bounded_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = ManualClock()
    monkeypatch.setattr(slots, "describe_states", lambda config, ids: ["PrepareAbort"] + [None] * 7)
    monkeypatch.setattr(slots, "_sleep", lambda s: clock.advance(int(s * 1000)))
    assert slots.claim_transactional_id({}, "p", 0, 0) == "p-0-1"
    assert clock.now_ms() == sum(slots.ENDING_RECHECK_MS)
