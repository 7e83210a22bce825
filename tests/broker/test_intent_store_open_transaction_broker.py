"""The Kafka intent store behind a transaction left open on its shared partition, on a real broker.

Every query's records share partition 0 of the intent topic, and a read_committed reader sees
only what lies below the last stable offset. A transactional producer (an independent client,
confluent-kafka) holds a record open there, the way a driver killed between a fence write and
its commit does: the query's own intent, written after it, must still be read back as the
latest (never the older record below the open transaction), by a new driver as by the one that
wrote it; and a record of the query's own key inside the open transaction (its fate not known
yet) makes the read wait, then fail naming the topic, partition and open range.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from kafka_sink.admin.transactions import TransactionAdmin
from kafka_sink.sink_errors import IntentStoreError
from kafka_sink.spark.driver.eos import fence, kafka_intents
from kafka_sink.spark.driver.eos.fence import DriverFence, open_fence
from kafka_sink.spark.driver.eos.intents import DONE, INTENT, BatchRecord
from kafka_sink.spark.driver.eos.kafka_intents import KafkaIntentStore


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


def _open_transaction(bootstrap: str, topic: str, key: bytes) -> Producer:
    """A producer whose transaction holds one record of ``key`` in partition 0, left open."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"other-{uuid.uuid4().hex[:8]}",
            "transaction.timeout.ms": 120_000,
        }
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, key=key, value=b"{}", partition=0)
    assert producer.flush(30) == 0
    return producer


def test_a_transaction_left_open_on_the_intent_partition_neither_hides_nor_fails_the_latest(
    kafka_bootstrap: str,
) -> None:
    config = {"bootstrap.servers": kafka_bootstrap}
    topic = f"intents-{uuid.uuid4().hex[:8]}"
    prefix, key = f"lso-test-{uuid.uuid4().hex[:8]}", "query-y"
    with TransactionAdmin(config, 30) as admin:
        first = KafkaIntentStore.open(
            config, topic, timeout_s=10, fence=_take_fence(admin, prefix, key)
        )
        first.write(BatchRecord(key, 4, DONE, ()))
        # Another query's driver is killed between the Produce and the EndTxn of its write.
        other = _open_transaction(kafka_bootstrap, topic, b"other-query")
        mine = None
        try:
            first.write(BatchRecord(key, 5, INTENT, ()))
            # The driver that wrote it reads it back (its next batch), within the open time.
            again = first.last(key)
            assert again is not None and (again.batch_id, again.state) == (5, INTENT)
            first.close()
            # A new driver of the query (nothing cached) reads the intent, not DONE 4 below
            # the open transaction.
            second = KafkaIntentStore.open(
                config, topic, timeout_s=10, fence=_take_fence(admin, prefix, key)
            )
            recovered = second.last(key)
            second.close()
            assert recovered is not None and (recovered.batch_id, recovered.state) == (5, INTENT)
            # A record of the query's own key in a transaction still open: its fate is not known,
            # so the read waits, then names the open range instead of answering.
            mine = _open_transaction(kafka_bootstrap, topic, key.encode())
            kafka_intents._POSITIONS.clear()
            third = KafkaIntentStore.open(config, topic, timeout_s=3)
            with pytest.raises(IntentStoreError) as refused:
                third.last(key)
            third.close()
            message = str(refused.value)
            assert f"{topic}-0" in message and "transaction still open" in message, message
            assert "query-y" in message, message
            # Once that transaction is aborted, the latest is the intent again.
            mine.abort_transaction(30)
            mine = None
            kafka_intents._POSITIONS.clear()
            fourth = KafkaIntentStore.open(config, topic, timeout_s=10)
            latest = fourth.last(key)
            fourth.close()
            assert latest is not None and latest.batch_id == 5
        finally:
            other.abort_transaction(30)
            if mine is not None:
                mine.abort_transaction(30)
