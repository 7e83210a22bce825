"""What an open transaction wrote, learned from the partition leaders, against real brokers.

A transactional KafkaProducer prepares one transaction that another client commits (as the
sink's tasks and driver do), re-initialises (a new epoch, as every exactly-once task does) and
writes records to two partitions in several batches, then stays open.
``TransactionAdmin.producers`` must show, per partition, the transaction's first offset,
``last_sequence + 1`` equal to the records written, and a log end offset past them; the sink's
counting rule (``spark/driver/eos/aborted.py``) must count exactly what an independent
read_uncommitted consumer (kafka-python) finds of it, and read_committed must find none of it.
On the session broker (Transactions V2) and on a dedicated one formatted with
``transaction.version=1``, where the epoch stays across transactions: there a second
transaction without InitProducerId counts both transactions' records, which is why the rule
needs a transaction that began its epoch.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from kafka_sink import KafkaProducer
from kafka_sink.admin.transactions import TransactionAdmin
from kafka_sink.spark.commit_log.document import PartitionRange
from kafka_sink.spark.driver.eos.aborted import count_unfinished
from kafka_sink.spark.eos_plan import transactional_id
from kafka_sink.testing.local_kafka import LocalKafka
from kafka_sink.testing.oracle import create_topic, read_all
from tests.conftest import running

pytestmark = pytest.mark.broker

COMMITTED = {0: 3, 1: 5}  # the first transaction's records per partition
OPEN = {0: (2, 2), 1: (4, 2)}  # the open one's, per partition, in two flushes


@pytest.fixture(scope="module")
def tv1_kafka() -> Iterator[LocalKafka]:
    yield from running(LocalKafka(nodes=1, transaction_version=1), "Transactions V1 Kafka")


@pytest.fixture(params=[2, 1], ids=["tv2", "tv1"])
def bootstrap(request: pytest.FixtureRequest) -> str:
    if request.param == 2:
        return str(request.getfixturevalue("kafka_bootstrap"))
    return request.getfixturevalue("tv1_kafka").bootstrap_servers  # type: ignore[no-any-return]


def _send(producer: KafkaProducer, topic: str, counts: dict[int, int], tag: str) -> None:
    for partition, n in counts.items():
        for i in range(n):
            producer.send(topic, value=f"{tag}-{partition}-{i}".encode(), partition=partition)
    producer.flush(30)


def test_the_leaders_show_what_an_open_transaction_wrote(bootstrap: str) -> None:
    topic = f"producers-{uuid.uuid4().hex[:10]}"
    create_topic(bootstrap, topic, partitions=2)
    prefix = f"pykafka-producers-{uuid.uuid4().hex[:8]}"
    tid = transactional_id(prefix, 0, 0)
    config = {"bootstrap.servers": bootstrap, "transactional.id": tid}
    with KafkaProducer(config) as producer, TransactionAdmin(config, timeout=30) as admin:
        producer.init_transactions(timeout=60)
        producer.begin_transaction()
        _send(producer, topic, COMMITTED, "committed")
        # As a task and its driver: prepared, committed by another client, then the next
        # task's InitProducerId (a new epoch) on the same producer.
        admin.complete(producer.prepare_transaction(30), True)
        producer.init_transactions(timeout=60)
        producer.begin_transaction()
        for flush in range(2):
            _send(producer, topic, {p: counts[flush] for p, counts in OPEN.items()}, f"open{flush}")

        (listing,) = admin.describe([tid]).values()
        assert listing is not None and listing.state == "Ongoing"
        assert listing.partitions == ((topic, 0), (topic, 1))
        leaders = admin.producers(listing.partitions)
        for p in (0, 1):
            state = leaders[(topic, p)].producer(listing.producer_id)
            assert state is not None
            assert state.producer_epoch == listing.producer_epoch
            assert state.current_txn_start_offset == COMMITTED[p] + 1  # after the commit marker
            assert state.open_records() == sum(OPEN[p])
            assert leaders[(topic, p)].log_end_offset == COMMITTED[p] + 1 + sum(OPEN[p])

        written = count_unfinished(
            [0], prefix=prefix, describe=admin.describe, producers=admin.producers
        )
        assert written.counted is True
        assert sorted(written.ranges, key=lambda r: r.partition) == [
            PartitionRange(topic, p, COMMITTED[p] + 1, COMMITTED[p] + sum(OPEN[p]), sum(OPEN[p]))
            for p in (0, 1)
        ]

        # An independent reader finds exactly that many of the open transaction's records there.
        total = sum(COMMITTED.values()) + sum(sum(c) for c in OPEN.values())
        seen = read_all(bootstrap, topic, expected=total)
        for r in written.ranges:
            mine = [
                x
                for x in seen
                if x.partition == r.partition and r.first_offset <= x.offset <= r.last_offset
            ]
            assert len(mine) == r.record_count
            assert all(x.value is not None and x.value.startswith(b"open") for x in mine)
        committed = read_all(
            bootstrap, topic, expected=sum(COMMITTED.values()), isolation_level="read_committed"
        )
        assert not [x for x in committed if x.value is not None and x.value.startswith(b"open")]

        # A second transaction without InitProducerId: under V1 its epoch is the last one's, so
        # the leader's sequence goes on from it and counts both transactions' records.
        producer.commit_transaction(timeout=30)
        producer.begin_transaction()
        _send(producer, topic, {0: 1}, "again")
        (again,) = admin.describe([tid]).values()
        assert again is not None
        state = admin.producers([(topic, 0)])[(topic, 0)].producer(again.producer_id)
        assert state is not None
        v1 = listing.producer_epoch == again.producer_epoch
        assert state.open_records() == (sum(OPEN[0]) + 1 if v1 else 1)
        producer.abort_transaction(timeout=30)
