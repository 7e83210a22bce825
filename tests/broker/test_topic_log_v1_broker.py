"""TopicLog's fenced writes on a broker formatted with ``transaction.version=1``: the epoch stays
across transactions, so each write goes on at the next sequence, and a write whose EndTxn failed
(then aborted) must not leave the next write a sequence the leader already holds.

A dedicated single-node Kafka (Transactions V1) for the module; records are read back by an
independent client (kafka-python, read_committed).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafka_sink.admin import topic_log as topic_log_module
from kafka_sink.admin.topic_log import TopicLog
from kafka_sink.errors import KafkaError, ProducerFencedError
from kafka_sink.testing.local_kafka import LocalKafka
from kafka_sink.testing.oracle import create_topic, read_all
from tests.conftest import running

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tv1_kafka() -> Iterator[LocalKafka]:
    yield from running(LocalKafka(nodes=1, transaction_version=1), "Transactions V1 Kafka")


@pytest.fixture
def log(tv1_kafka: LocalKafka) -> Iterator[TopicLog]:
    log = TopicLog.from_config({"bootstrap.servers": tv1_kafka.bootstrap_servers}, 30)
    yield log
    log.close()


def _topic(kafka: LocalKafka) -> str:
    name = f"intents-v1-{uuid.uuid4().hex[:10]}"
    create_topic(kafka.bootstrap_servers, name, partitions=1)
    return name


def _committed(kafka: LocalKafka, topic: str, expected: int) -> list[bytes | None]:
    records = read_all(
        kafka.bootstrap_servers, topic, expected=expected, isolation_level="read_committed"
    )
    return [r.value for r in records]


def test_a_newer_init_fences_the_earlier_writer_under_v1(
    tv1_kafka: LocalKafka, log: TopicLog
) -> None:
    topic = _topic(tv1_kafka)
    fence = f"test-{uuid.uuid4().hex[:8]}.fence"
    old = log.init_producer_id(fence, 60_000)
    _, old = log.append_transactional(topic, 0, b"q", b"old-1", old)
    _, old = log.append_transactional(topic, 0, b"q", b"old-2", old)
    assert old.sequence == 2  # V1: the epoch stayed, the sequence went on
    new = log.init_producer_id(fence, 60_000)
    with pytest.raises(ProducerFencedError):
        log.append_transactional(topic, 0, b"q", b"old-3", old)
    _, new = log.append_transactional(topic, 0, b"q", b"new-1", new)
    assert _committed(tv1_kafka, topic, 3) == [b"old-1", b"old-2", b"new-1"]


def _fail_once(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, when: Any) -> None:
    """``owner.name`` fails for good, unsent, on its first call that ``when`` accepts."""
    real = getattr(owner, name)
    pending = [True]

    def failing(*args: Any, **kwargs: Any) -> Any:
        if pending and when(args):
            pending.pop()
            raise KafkaError(f"{name} failed (test)")
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, failing)


# Where the failed write stopped: its record landed and its EndTxn(commit) was lost, or its
# Produce was lost (the record never landed). Either way it is aborted, as the intent store does.
FAILURES = {
    "end_txn": (topic_log_module, "end_transaction", lambda args: args[2] is True),
    "produce": (TopicLog, "_produce", lambda args: True),
}


@pytest.mark.parametrize("failed_at", sorted(FAILURES))
def test_the_write_after_an_aborted_one_is_visible_under_v1(
    tv1_kafka: LocalKafka, log: TopicLog, monkeypatch: pytest.MonkeyPatch, failed_at: str
) -> None:
    topic = _topic(tv1_kafka)
    state = log.init_producer_id(f"test-{uuid.uuid4().hex[:8]}.fence", 60_000)
    _, state = log.append_transactional(topic, 0, b"q", b"first", state)
    _fail_once(monkeypatch, *FAILURES[failed_at])
    with pytest.raises(KafkaError, match="failed \\(test\\)"):
        log.append_transactional(topic, 0, b"q", b"aborted", state)
    state = log.abort_transactional(topic, 0, state)
    _, state = log.append_transactional(topic, 0, b"q", b"second", state)
    offset, state = log.append_transactional(topic, 0, b"q", b"third", state)
    end = log.end_offset(topic, 0, at_least=offset + 1)
    assert [r.value for r in log.read(topic, 0, 0, end)] == [b"first", b"second", b"third"]
    assert _committed(tv1_kafka, topic, 3) == [b"first", b"second", b"third"]
