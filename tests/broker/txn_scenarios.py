"""Transaction scenarios shared by the broker tests of Transactions V2 (the session broker) and
V1 (a cluster formatted with ``transaction.version=1``); kafka-python reads back as an
independent consumer, read_committed and read_uncommitted."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from kafka_sink import KafkaProducer
from kafka_sink.errors import ProducerFencedError
from kafka_sink.testing.oracle import create_topic, read_all

TopicMaker = Callable[[int], str]


def new_id(prefix: str = "txn") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def topic_maker(bootstrap: str) -> TopicMaker:
    def make(partitions: int) -> str:
        name = new_id("txn-topic")
        create_topic(bootstrap, name, partitions, 1, None)
        return name

    return make


def values(bootstrap: str, topic: str, isolation_level: str) -> set[bytes]:
    return {r.value or b"" for r in read_all(bootstrap, topic, isolation_level=isolation_level)}


def commit_and_abort_across_partitions_and_topics(
    bootstrap: str, make_topic: TopicMaker, expected_transaction_version: int
) -> None:
    """Three transactions over 3 + 2 partitions of two topics; the second is aborted after its
    records reached the log. read_committed sees exactly the committed ones."""
    a, b = make_topic(3), make_topic(2)
    written: dict[int, set[tuple[str, bytes]]] = {}
    with KafkaProducer({"bootstrap.servers": bootstrap, "transactional.id": new_id()}) as p:
        p.init_transactions(timeout=60)
        tm = p._txn
        assert tm is not None and tm.transaction_version == expected_transaction_version
        epochs = []
        for n in range(3):
            p.begin_transaction()
            futures = [p.send(a, b"a%d-%d" % (n, i), partition=i % 3) for i in range(9)]
            futures += [p.send(b, b"b%d-%d" % (n, i), partition=i % 2) for i in range(4)]
            written[n] = {(a, b"a%d-%d" % (n, i)) for i in range(9)} | {
                (b, b"b%d-%d" % (n, i)) for i in range(4)
            }
            if n == 1:
                p.flush(30)  # the aborted records are in the log, then aborted
                assert all(f.exception(0) is None for f in futures)
                p.abort_transaction(timeout=30)
            else:
                p.commit_transaction(timeout=30)
                assert all(f.get(0).offset >= 0 for f in futures)
            epochs.append(tm.producer_epoch)
        if expected_transaction_version >= 2:
            # Every EndTxn v5 bumps the epoch; Transactions V1 keeps it.
            assert epochs == sorted(epochs) and len(set(epochs)) == 3
        else:
            assert len(set(epochs)) == 1
    for topic in (a, b):
        committed = {v for t, v in written[0] | written[2] if t == topic}
        everything = {v for n in range(3) for t, v in written[n] if t == topic}
        assert values(bootstrap, topic, "read_committed") == committed
        assert values(bootstrap, topic, "read_uncommitted") == everything


def fencing(bootstrap: str, make_topic: TopicMaker) -> None:
    """A second producer with the same transactional id fences the first: its commit and its
    next send raise ProducerFencedError, and nothing of its transaction becomes visible."""
    topic = make_topic(2)
    tid = new_id()
    config = {"bootstrap.servers": bootstrap, "transactional.id": tid}
    first = KafkaProducer(config)
    second = KafkaProducer(config)
    try:
        first.init_transactions(timeout=60)
        first.begin_transaction()
        for i in range(6):
            first.send(topic, b"zombie-%d" % i, partition=i % 2)
        first.flush(30)
        second.init_transactions(timeout=60)  # aborts the first one's open transaction
        with pytest.raises(ProducerFencedError, match="another producer"):
            first.commit_transaction(timeout=30)
        with pytest.raises(ProducerFencedError):
            first.send(topic, b"after-fence", partition=0)
        second.begin_transaction()
        second.send(topic, b"winner", partition=1)
        second.commit_transaction(timeout=30)
    finally:
        first.close(5)
        second.close(5)
    assert values(bootstrap, topic, "read_committed") == {b"winner"}
    seen = values(bootstrap, topic, "read_uncommitted")
    assert {b"zombie-%d" % i for i in range(6)} <= seen and b"after-fence" not in seen
