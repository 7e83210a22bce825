"""A failed batch job's errors, and the log lines of its abort and sweep, say what the user should
do: no later commit, abort or start of a query finishes a job's commit (Spark calls nothing
more once its abort returned), and a job without ``idempotencyKey`` is never picked up again,
so they never promise that; a job's log lines give the ``transaction.timeout.ms`` bound instead.

Each failure is driven on the coordinator model with the committer as the data source builds it
for a batch job (``EosCommitter.for_plan`` of an unfenced plan, or with a key), next to the same
failure of a streaming batch, whose wording stays.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from kafka_sink.sink_errors import (
    SinkCommitIncompleteError,
    SinkIntentUnknownError,
    SinkTransactionLostError,
)
from kafka_sink.spark import fault_hooks
from kafka_sink.spark.driver.eos import committer as committer_module
from kafka_sink.spark.driver.eos.committer import EosCommitter
from kafka_sink.spark.driver.eos.idempotency import job_identity
from kafka_sink.spark.driver.eos.intents import MemoryIntentStore
from kafka_sink.spark.eos_plan import EosPlan
from tests.fakes.coordinator import TIMEOUT, FakeCoordinator
from tests.unit.spark.eos_support import PREFIX, TIMEOUT_MS, FaultyStore, run_tasks

QUERY_PROMISE = "start of the query"


class _Model:
    def __init__(self) -> None:
        self.coordinator = FakeCoordinator()
        self.store = FaultyStore()


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Model]:
    """``for_plan`` over the model: its ops, its manual clock and a memory store."""
    m = _Model()
    real_init = EosCommitter.__init__

    def init(self: EosCommitter, store: Any, ops: Any, **kwargs: Any) -> None:
        kwargs.update(clock=m.coordinator.clock, sleep_ms=m.coordinator.advance)
        real_init(self, m.store, ops, **kwargs)

    from tests.fakes.coordinator import coordinator_ops

    monkeypatch.setattr(EosCommitter, "__init__", init)
    monkeypatch.setattr(
        committer_module,
        "listing_ops",
        lambda config, timeout_s=None: coordinator_ops(m.coordinator),
    )
    monkeypatch.setattr(fault_hooks, "safeguards", fault_hooks.Safeguards(fence=False))
    monkeypatch.setattr(
        committer_module, "open_intent_store", lambda plan, config, fence=None: MemoryIntentStore()
    )
    yield m


CONFIG = {"bootstrap.servers": "h:1", "transaction.timeout.ms": str(TIMEOUT_MS)}
KEYED = job_identity("nightly", topic="t", prefix=PREFIX)
PLANS = {
    "job": EosPlan(PREFIX, "q1", None),
    "keyed job": EosPlan(PREFIX, "q1", None, fenced=True, idempotency_key="nightly"),
    "query": EosPlan(PREFIX, "q1", None, fenced=True),
}
WRITES = pytest.mark.parametrize("write", list(PLANS))


def _text(error: BaseException) -> str:
    return str(error)


@WRITES
def test_a_commit_kafka_could_not_finish_says_who_finishes_it(model: _Model, write: str) -> None:
    tasks = run_tasks(model.coordinator, 0)
    model.coordinator.script("end_txn", *[TIMEOUT] * 10_000)
    c = EosCommitter.for_plan(PLANS[write], CONFIG)
    with pytest.raises(SinkCommitIncompleteError) as info:
        c.commit(0, tasks)
    text = _text(info.value)
    assert "is recorded (its intent is durable)" in text and "Fix:" in text
    if write == "query":
        assert "the next commit, abort or start of the query commits the rest" in text
        return
    assert QUERY_PROMISE not in text
    assert "Spark's abort of the job tries once more" in text
    if write == "keyed job":
        assert "the next run with idempotencyKey 'nightly' commits the rest" in text
    else:
        assert "the job has no idempotencyKey" in text
        assert f"after transaction.timeout.ms ({TIMEOUT_MS} ms)" in text
        assert "write the rows of the Spark partitions not visible again" in text


@WRITES
def test_an_intent_that_may_be_recorded_says_who_settles_it(model: _Model, write: str) -> None:
    tasks = run_tasks(model.coordinator, 0)
    model.store.fail_writes.append("after")
    model.store.fail_reads = 0
    real_last = model.store.last
    reads: list[str] = []

    def second_read_fails(key: str) -> Any:
        reads.append(key)
        if len(reads) == 2:
            raise OSError("the intent store did not answer (scripted)")
        return real_last(key)

    model.store.last = second_read_fails  # type: ignore[method-assign]
    c = EosCommitter.for_plan(PLANS[write], CONFIG)
    with pytest.raises(SinkIntentUnknownError) as info:
        c.commit(0, tasks)
    text = _text(info.value)
    assert "may be recorded" in text and "Fix:" in text
    if write == "query":
        assert QUERY_PROMISE in text
        return
    assert QUERY_PROMISE not in text
    assert "Spark's abort of the job" in text
    if write == "keyed job":
        assert "the next run with idempotencyKey 'nightly'" in text
    else:
        assert "none of the job's rows becomes visible" in text and "run the job again" in text


@WRITES
def test_a_commit_kafka_lost_part_of_says_what_a_rerun_writes(model: _Model, write: str) -> None:
    tasks = run_tasks(model.coordinator, 0)
    # The first EndTxn goes through; the driver is then away longer than the timeout.
    model.coordinator.script(
        "end_txn", lambda: None, lambda: model.coordinator.advance(TIMEOUT_MS + 10_000)
    )
    c = EosCommitter.for_plan(PLANS[write], CONFIG)
    with pytest.raises(SinkTransactionLostError) as info:
        c.commit(0, tasks)
    text = _text(info.value)
    assert "Spark partitions [0]" in text and "Fix:" in text
    if write == "job":
        assert "the job has no idempotencyKey" in text
        assert "running it again writes every partition again, the visible ones twice" in text
        assert "write the rows of the lost Spark partitions again" in text
        assert "re-run writes only the lost" not in text
    else:
        assert "re-run writes only the lost partitions" in text


@WRITES
def test_a_commit_failed_before_anything_became_visible_says_how_to_write_it(
    model: _Model, write: str
) -> None:
    tasks = run_tasks(model.coordinator, 0)
    model.coordinator.init_producer_id(f"{PREFIX}-1-0")  # a zombie attempt fences one
    c = EosCommitter.for_plan(PLANS[write], CONFIG)
    with pytest.raises(SinkTransactionLostError) as info:
        c.commit(0, tasks)
    text = _text(info.value)
    assert "before anything became visible" in text
    if write == "query":
        assert "the batch's re-run writes all of it again" in text
    else:
        assert "running the job again writes it once" in text
        assert "re-run" not in text.split("Fix:")[0]


@WRITES
def test_a_commit_kafka_lost_all_of_says_what_writes_it(model: _Model, write: str) -> None:
    tasks = run_tasks(model.coordinator, 0)
    # The driver is away longer than the timeout right after its intent: nothing is committed.
    model.coordinator.script("end_txn", lambda: model.coordinator.advance(TIMEOUT_MS + 10_000))
    c = EosCommitter.for_plan(PLANS[write], CONFIG)
    with pytest.raises(SinkTransactionLostError) as info:
        c.commit(0, tasks)
    text = _text(info.value)
    if write == "query":
        assert "the batch is run again and writes these rows again" in text
    else:
        assert "nothing of the job became visible: running the job again writes it once" in text


# -- log lines of an abort or sweep that could not end something -------------------------------
#
# The abort does not fail (Spark is failing the batch already) and a sweep's trouble does not
# fail a commit: these say it in the log, with who ends what is left and when.


def _logged(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)


def _assert_says_what_happens_next(text: str, write: str, *, query: str, keyed: str) -> None:
    if write == "query":
        assert query in text, text
        return
    assert QUERY_PROMISE not in text and "the next commit" not in text, text
    assert "restart" not in text, text
    if write == "keyed job":
        assert keyed in text and "run the job again with the same key" in text, text
    else:
        assert "the job has no idempotencyKey" in text, text
        assert f"after transaction.timeout.ms ({TIMEOUT_MS} ms)" in text, text


@WRITES
def test_an_abort_that_cannot_finish_a_recorded_commit_says_who_finishes_it(
    model: _Model, write: str, caplog: pytest.LogCaptureFixture
) -> None:
    tasks = run_tasks(model.coordinator, 0)
    model.coordinator.script("end_txn", *[TIMEOUT] * 10_000)
    c = EosCommitter.for_plan(PLANS[write], CONFIG)
    with pytest.raises(SinkCommitIncompleteError):
        c.commit(0, tasks)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        c.abort(0, tasks)
    text = _logged(caplog)
    assert "could not finish the commit of batch 0 recorded before" in text, text
    _assert_says_what_happens_next(
        text,
        write,
        query="the next commit, abort or start of the query commits the rest",
        keyed="the next run with idempotencyKey 'nightly' commits the rest",
    )
    if write == "job":
        assert "nothing commits the rest" in text
        assert "write again the rows of the Spark partitions" in text


@WRITES
def test_an_abort_that_cannot_read_the_store_says_who_ends_the_batch(
    model: _Model, write: str, caplog: pytest.LogCaptureFixture
) -> None:
    tasks = run_tasks(model.coordinator, 0)
    model.store.fail_reads = 1
    c = EosCommitter.for_plan(PLANS[write], CONFIG)
    with caplog.at_level(logging.WARNING):
        c.abort(0, tasks)
    text = _logged(caplog)
    assert "the intent store could not be read while aborting batch 0" in text, text
    assert "stay open" in text
    _assert_says_what_happens_next(
        text,
        write,
        query="the next commit or start of the query commits them",
        keyed="the next run with idempotencyKey 'nightly' commits them",
    )
    if write == "job":
        assert "nothing reads its record again" in text
        assert "write again the rows of the Spark partitions" in text


@WRITES
def test_a_sweep_that_cannot_list_says_who_ends_the_leftovers(
    model: _Model, write: str, caplog: pytest.LogCaptureFixture
) -> None:
    tasks = run_tasks(model.coordinator, 0)
    model.coordinator.script("list", TIMEOUT)
    c = EosCommitter.for_plan(PLANS[write], CONFIG)
    with caplog.at_level(logging.WARNING):
        c.abort(0, tasks)
    text = _logged(caplog)
    assert "could not list open transactions of prefix" in text, text
    assert "never become visible" in text
    _assert_says_what_happens_next(
        text,
        write,
        query="the next commit, abort or start of the query ends them",
        keyed="the next run with idempotencyKey 'nightly' ends them",
    )
    if write == "job":
        assert "read_committed readers of their partitions wait until then" in text


@WRITES
def test_an_abort_kafka_did_not_answer_says_who_ends_the_transaction(
    model: _Model, write: str, caplog: pytest.LogCaptureFixture
) -> None:
    tasks = run_tasks(model.coordinator, 0)
    model.coordinator.script("end_txn", *[TIMEOUT] * len(tasks))
    c = EosCommitter.for_plan(PLANS[write], CONFIG)
    with caplog.at_level(logging.WARNING):
        c.abort(0, tasks)
    text = _logged(caplog)
    assert f"could not abort transaction '{PREFIX}-0-0'" in text, text
    _assert_says_what_happens_next(
        text,
        write,
        query="the next commit, abort or start of the query ends them",
        keyed="the next run with idempotencyKey 'nightly' ends them",
    )
