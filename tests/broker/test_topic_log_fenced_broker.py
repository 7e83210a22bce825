"""TopicLog's fenced writes on a real broker: InitProducerId on one transactional id fences the
earlier writer, and read_committed reads never return what a fenced or aborted write left.

Records are also read by an independent client (kafka-python, read_committed).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from kafka_sink.admin.topic_log import TopicLog, _one_record_batch
from kafka_sink.errors import (
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    ProducerFencedError,
)
from kafka_sink.testing.oracle import read_all
from tests.conftest import TopicFactory

_FENCED = (ProducerFencedError, InvalidProducerEpochError, InvalidProducerIdMappingError)


@pytest.fixture
def logs(kafka_bootstrap: str) -> Iterator[tuple[TopicLog, TopicLog]]:
    config = {"bootstrap.servers": kafka_bootstrap}
    first, second = TopicLog.from_config(config, 30), TopicLog.from_config(config, 30)
    yield first, second
    first.close()
    second.close()


def test_second_init_fences_the_first_writer(
    logs: tuple[TopicLog, TopicLog], topic_factory: TopicFactory, kafka_bootstrap: str
) -> None:
    old, new = logs
    topic = topic_factory(partitions=1)
    fence = f"test-{uuid.uuid4().hex[:8]}.fence"
    old_state = old.init_producer_id(fence, 60_000)
    offset, old_state = old.append_transactional(topic, 0, b"q", b"old-1", old_state)
    assert offset >= 0
    new_state = new.init_producer_id(fence, 60_000)
    with pytest.raises(_FENCED):
        old.append_transactional(topic, 0, b"q", b"old-2", old_state)
    _, new_state = new.append_transactional(topic, 0, b"q", b"new-1", new_state)
    offset, new_state = new.append_transactional(topic, 0, b"q", b"new-2", new_state)

    end = new.end_offset(topic, 0, at_least=offset + 1)
    ours = [r.value for r in new.read(topic, 0, 0, end)]
    assert ours == [b"old-1", b"new-1", b"new-2"]
    seen = read_all(kafka_bootstrap, topic, expected=3, isolation_level="read_committed")
    assert [r.value for r in seen] == [b"old-1", b"new-1", b"new-2"]


def test_read_committed_skips_an_aborted_write(
    logs: tuple[TopicLog, TopicLog], topic_factory: TopicFactory
) -> None:
    log, _ = logs
    topic = topic_factory(partitions=1)
    fence = f"test-{uuid.uuid4().hex[:8]}.fence"
    state = log.init_producer_id(fence, 60_000)
    _, state = log.append_transactional(topic, 0, b"q", b"kept", state)
    # A write whose transaction is then aborted (as an InitProducerId of a newer holder does to
    # a write in flight): Produce only, then EndTxn(abort).
    batch = _one_record_batch(b"q", b"aborted").encode(
        producer_id=state.producer_id,
        producer_epoch=state.producer_epoch,
        base_sequence=0,
        is_transactional=True,
    )
    deadline = log._deadline("test")
    log._produce(topic, 0, batch, deadline, transactional_id=state.transactional_id, tv2=True)
    newer = log.init_producer_id(fence, 60_000)  # aborts the write in flight
    offset, newer = log.append_transactional(topic, 0, b"q", b"after", newer)
    # The commit markers follow EndTxn's answer: wait until the stable end covers the record.
    end = log.end_offset(topic, 0, at_least=offset + 1)
    values = [r.value for r in log.read(topic, 0, 0, end)]
    assert values == [b"kept", b"after"]
