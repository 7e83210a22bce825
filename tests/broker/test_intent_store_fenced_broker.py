"""The Kafka intent store through a query's fence, on a real broker: once a newer driver took the
fence, the older driver's intent write is refused (SinkFencedError) and never visible; an
independent read_committed consumer (kafka-python) reads only the newer driver's records.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafka_sink.admin.transactions import TransactionAdmin
from kafka_sink.errors import KafkaConnectionError
from kafka_sink.sink_errors import IntentStoreError, SinkFencedError, SinkOptionError
from kafka_sink.spark.driver.eos import fence, kafka_intents
from kafka_sink.spark.driver.eos.claims import refuse_foreign_claim, take_claim
from kafka_sink.spark.driver.eos.fence import DriverFence, open_fence
from kafka_sink.spark.driver.eos.intents import INTENT, BatchRecord
from kafka_sink.spark.driver.eos.kafka_intents import KafkaIntentStore
from kafka_sink.testing.oracle import read_all


@pytest.fixture(autouse=True)
def _fresh_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("SPARK_LOCAL_DIRS", raising=False)
    kafka_intents._POSITIONS.clear()
    kafka_intents.close_idle()
    yield
    fence._HELD.clear()
    kafka_intents._POSITIONS.clear()
    kafka_intents.close_idle()


def _take_fence(admin: TransactionAdmin, prefix: str, query_key: str) -> DriverFence:
    fence._HELD.clear()  # each driver is a process of its own
    kafka_intents._POSITIONS.clear()
    return open_fence(
        prefix,
        query_key,
        init=lambda tid: admin.init_producer_id(tid, 60_000),
        describe=lambda tid: admin.describe([tid]).get(tid),
    )


def test_an_old_driver_s_intent_is_refused_once_a_new_driver_took_the_fence(
    kafka_bootstrap: str,
) -> None:
    config = {"bootstrap.servers": kafka_bootstrap}
    topic = f"intents-{uuid.uuid4().hex[:8]}"
    prefix, key = f"fence-test-{uuid.uuid4().hex[:8]}", "query-1"
    with TransactionAdmin(config, 30) as admin:
        old_fence = _take_fence(admin, prefix, key)
        old = KafkaIntentStore.open(config, topic, timeout_s=30, fence=old_fence)
        old.write(BatchRecord(key, 1, INTENT, ()))
        new_fence = _take_fence(admin, prefix, key)
        new = KafkaIntentStore.open(config, topic, timeout_s=30, fence=new_fence)
        try:
            with pytest.raises(SinkFencedError, match=prefix):
                old.write(BatchRecord(key, 2, INTENT, ()))
            with pytest.raises(SinkFencedError):
                old_fence.check("checking")
            new_fence.check("checking")
            record = new.last(key)
            assert record is not None and record.batch_id == 1
            new.write(BatchRecord(key, 3, INTENT, ()))
            take_claim(new, prefix, key)
            with pytest.raises(SinkOptionError, match="query-1"):
                refuse_foreign_claim(new, prefix, "query-2")
        finally:
            old.close()
            new.close()
    seen = read_all(kafka_bootstrap, topic, expected=3, isolation_level="read_committed")
    batches = [json.loads(r.value)["batch_id"] for r in seen if r.key == key.encode()]
    assert batches == [1, 3]


class _AnswerLostOnce:
    """A TopicLog whose next transactional append is applied (the record written and its
    EndTxn committed by the broker, the epoch bumped) but whose answer the caller never gets."""

    def __init__(self, log: object) -> None:
        self._log = log
        self.armed = False

    def append_transactional(self, *args: object, **kwargs: object) -> object:
        result = self._log.append_transactional(*args, **kwargs)  # type: ignore[attr-defined]
        if self.armed:
            self.armed = False
            raise KafkaConnectionError("the connection was lost before the EndTxn answer")
        return result

    def __getattr__(self, name: str) -> object:
        if name == "_log":  # not set yet (a copy being built): no recursion through here
            raise AttributeError(name)
        return getattr(self._log, name)


def test_an_intent_whose_end_txn_answer_was_lost_does_not_leave_the_fence_behind(
    kafka_bootstrap: str,
) -> None:
    config = {"bootstrap.servers": kafka_bootstrap}
    topic = f"intents-{uuid.uuid4().hex[:8]}"
    prefix, key = f"fence-test-{uuid.uuid4().hex[:8]}", "query-1"
    with TransactionAdmin(config, 30) as admin:
        held = _take_fence(admin, prefix, key)
        store = KafkaIntentStore.open(config, topic, timeout_s=30, fence=held)
        log = _AnswerLostOnce(store.log)
        store.log = log  # type: ignore[assignment]
        try:
            assert log.transactions_v2(topic, 0), "the broker runs Transactions V1"
            store.write(BatchRecord(key, 1, INTENT, ()))
            before = held.token
            log.armed = True
            with pytest.raises(IntentStoreError):
                store.write(BatchRecord(key, 2, INTENT, ()))
            # The broker committed the record and moved the fence on: the driver follows it.
            now = admin.describe([fence.fence_id(prefix)])[fence.fence_id(prefix)]
            assert now is not None and now.state == "CompleteCommit"
            assert (held.token.producer_id, held.token.producer_epoch) == (
                now.producer_id,
                now.producer_epoch,
            )
            assert held.token.producer_epoch == before.producer_epoch + 1
            held.check("after the lost answer")
            store.write(BatchRecord(key, 3, INTENT, ()))
        finally:
            store.close()
    seen = read_all(kafka_bootstrap, topic, expected=3, isolation_level="read_committed")
    assert [json.loads(r.value)["batch_id"] for r in seen if r.key == key.encode()] == [1, 2, 3]


def test_an_intent_a_newer_drivers_fence_aborted_half_way_is_refused_as_fenced(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The newer driver's InitProducerId reaches the coordinator between the old driver's record
    and its EndTxn: the coordinator aborts the old write (answering the newer driver
    CONCURRENT_TRANSACTIONS until its retry), and the old driver's commit is refused
    (INVALID_TXN_STATE under Transactions V2). The old driver must say it was fenced: on PySpark
    4.0's timing, a run of a key that lost to another run said the intent store failed."""
    from kafka_sink.admin import topic_log
    from kafka_sink.wire.messages import InitProducerIdRequest

    config = {"bootstrap.servers": kafka_bootstrap}
    topic = f"intents-{uuid.uuid4().hex[:8]}"
    prefix, key = f"fence-test-{uuid.uuid4().hex[:8]}", "query-1"
    answers: list[int] = []
    real_end = topic_log.end_transaction

    def newer_driver_first(client: Any, prepared: Any, commit: bool, deadline: Any) -> Any:
        if not answers:  # once: the newer driver's first InitProducerId, not retried
            node = client.find_coordinator(prepared.transactional_id, deadline)
            request = InitProducerIdRequest(
                transactional_id=prepared.transactional_id, transaction_timeout_ms=60_000
            )
            answers.append(client.request(node, request, deadline).error_code)
        return real_end(client, prepared, commit, deadline)

    with TransactionAdmin(config, 30) as admin:
        old_fence = _take_fence(admin, prefix, key)
        old = KafkaIntentStore.open(config, topic, timeout_s=30, fence=old_fence)
        try:
            old.write(BatchRecord(key, 1, INTENT, ()))
            monkeypatch.setattr(topic_log, "end_transaction", newer_driver_first)
            with pytest.raises(SinkFencedError, match=prefix):
                old.write(BatchRecord(key, 2, INTENT, ()))
            monkeypatch.setattr(topic_log, "end_transaction", real_end)
            assert answers == [51]  # CONCURRENT_TRANSACTIONS: the fence was half-way
            new_fence = _take_fence(admin, prefix, key)  # its retry
            new = KafkaIntentStore.open(config, topic, timeout_s=30, fence=new_fence)
            try:
                new.write(BatchRecord(key, 3, INTENT, ()))
            finally:
                new.close()
        finally:
            old.close()
    seen = read_all(kafka_bootstrap, topic, expected=2, isolation_level="read_committed")
    assert [json.loads(r.value)["batch_id"] for r in seen if r.key == key.encode()] == [1, 3]
