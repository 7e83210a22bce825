"""The Kafka intent store reading a topic that other principals write garbage into.

Every exactly-once principal may write to the intent topic, so its partition may hold batches no
store wrote: decompression bombs, records with non-UTF-8 header keys, values that are not JSON.
The store reads through the real TopicLog and Fetch decoding, against a scripted partition whose
batches are the exact bytes under test.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import struct
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kafka_sink.admin.client import AdminClient
from kafka_sink.admin.topic_log import TopicLog, _one_record_batch
from kafka_sink.clock import ManualClock
from kafka_sink.errors import CorruptRecordError
from kafka_sink.prepared import PreparedTransaction
from kafka_sink.records.batch import SealedBatch, decode_batch
from kafka_sink.records.compression import CompressionType
from kafka_sink.sink_errors import IntentStoreError
from kafka_sink.spark.driver.eos import kafka_intents
from kafka_sink.spark.driver.eos.intents import INTENT, BatchRecord, record_to_json
from kafka_sink.spark.driver.eos.kafka_intents import KafkaIntentStore, claim_key
from tests.fakes.hostile import poisoned, zstd_bomb
from tests.unit.admin.test_topic_log import TOPIC, ClusterMetadata, LeaderChangeCluster, Replica


class HostileCluster(LeaderChangeCluster):
    """Partition 0 holds exactly the batches appended with ``put``."""

    def put(self, batch: SealedBatch | bytes) -> int:
        """Append a batch (sealed, or encoded at offset 0) at the log end; its base offset."""
        offset = len(self.replicas[0].log)
        encoded = batch.encode() if isinstance(batch, SealedBatch) else batch
        raw = struct.pack(">q", offset) + encoded[8:]  # the base offset is outside the CRC
        (last_delta,) = struct.unpack_from(">i", raw, 23)
        self.append(raw, None)
        for _ in range(last_delta):  # the batch's other offsets
            self.append(b"", None)
        return offset

    def _batch(self, replica: Replica, start: int) -> bytes:  # type: ignore[override]
        # From the batch holding ``start``: its base offset is the last one with bytes.
        while 0 < start < len(replica.log) and not replica.log[start][0]:
            start -= 1
        return b"".join(raw for raw, _none in replica.log[start : replica.high_watermark])


def _intent(key: str, batch_id: int) -> bytes:
    txn = PreparedTransaction(f"pykafka-{key}-0-{batch_id}", 7, batch_id, (("orders", 0),))
    record = BatchRecord(key, batch_id, INTENT, (txn,))
    return json.dumps({"format": 1, **record_to_json(record)}).encode()


def _written(key: bytes, value: bytes | None) -> SealedBatch:
    """A batch as the store writes it."""
    return _one_record_batch(key, value)


@functools.cache
def _bomb() -> SealedBatch:
    """256 MiB of zero-valued records in a few KB: four times the decoding limit."""
    return zstd_bomb(256)


@pytest.fixture
def cluster() -> HostileCluster:
    scripted = HostileCluster(ManualClock())
    scripted.metadata = ClusterMetadata(scripted)
    return scripted


@pytest.fixture(autouse=True)
def _fresh_process() -> Iterator[None]:
    kafka_intents._POSITIONS.clear()
    kafka_intents._SKIPPED.clear()
    yield
    kafka_intents._POSITIONS.clear()
    kafka_intents._SKIPPED.clear()


def _store(cluster: HostileCluster) -> KafkaIntentStore:
    assert cluster.metadata is not None
    client = AdminClient(
        cluster,
        cluster.metadata,
        cluster.clock,
        request_timeout_ms=1_000,
        retry_backoff_ms=100,
        retry_backoff_max_ms=1_000,
    )
    return KafkaIntentStore(TopicLog(client, timeout_ms=5_000), TOPIC, cluster="c:9092")


def test_bombs_and_poisoned_records_of_other_writers_are_passed_over(
    cluster: HostileCluster, caplog: pytest.LogCaptureFixture
) -> None:
    cluster.put(_written(b"q", _intent("q", 1)))
    bomb_at = cluster.put(_bomb())
    poison_at = cluster.put(poisoned(b"other"))
    cluster.put(_written(b"q", _intent("q", 2)))
    cluster.put(poisoned(b"q"))  # even under the query's key: no store writes headers
    cluster.put(_bomb())
    caplog.set_level(logging.WARNING, logger=kafka_intents.__name__)
    found = _store(cluster).last("q")
    assert found is not None and found.batch_id == 2
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 4
    assert any(f"{TOPIC}-0: batch at offset {bomb_at}: zstd: " in w for w in warnings)
    assert any(f"batch at offset {poison_at}" in w and "not UTF-8" in w for w in warnings)
    # Read again (from the start, as a new driver does): the same batches, no new warnings.
    kafka_intents._POSITIONS.clear()
    found = _store(cluster).last("q")
    assert found is not None and found.batch_id == 2
    assert len(caplog.records) == 4


def test_a_record_after_the_garbage_is_the_latest_and_none_before_it_is_lost(
    cluster: HostileCluster,
) -> None:
    cluster.put(_written(b"q", _intent("q", 1)))
    for _ in range(40):  # more than the first backward window
        cluster.put(poisoned(b"x"))
    found = _store(cluster).last("q")
    assert found is not None and found.batch_id == 1
    cluster.put(_bomb())
    cluster.put(_written(b"q", _intent("q", 3)))
    found = _store(cluster).last("q")
    assert found is not None and found.batch_id == 3


def test_a_batch_damaged_after_it_was_accepted_fails_the_read_naming_where(
    cluster: HostileCluster,
) -> None:
    cluster.put(_written(b"q", _intent("q", 1)))
    damaged = bytearray(_written(b"q", _intent("q", 2)).encode())
    damaged[-3] ^= 0x40  # its CRC no longer matches: it may be the query's own newest record
    at = cluster.put(bytes(damaged))
    with pytest.raises(IntentStoreError) as caught:
        _store(cluster).last("q")
    message = str(caught.value)
    assert f"cannot read {TOPIC}-0: batch at offset {at}: CRC-32C mismatch" in message
    assert "may hold this query's latest record" in message
    # Said once, with its own fix: not wrapped again as a read failure whose fix is ACLs.
    assert message.startswith(f"the exactly-once intent store cannot read topic {TOPIC!r}")
    assert "READ, WRITE and DESCRIBE" not in message


@pytest.mark.parametrize(
    ("value", "reason"),
    [(b"\xff\xfe not json", "is not JSON"), (b'{"format": 1, "batch_id": "x"}', "not a valid one")],
)
def test_the_querys_own_unreadable_record_fails_naming_key_topic_and_offset(
    cluster: HostileCluster, value: bytes, reason: str
) -> None:
    cluster.put(_written(b"q", _intent("q", 1)))
    at = cluster.put(_written(b"q", value))
    with pytest.raises(IntentStoreError) as caught:
        _store(cluster).last("q")
    message = str(caught.value)
    assert f"of key 'q' in {TOPIC}-0 at offset {at}" in message
    assert reason in message


def test_a_claim_that_is_not_utf8_fails_naming_where(cluster: HostileCluster) -> None:
    at = cluster.put(_written(claim_key("pre").encode(), b"\xff"))
    with pytest.raises(IntentStoreError, match=f"of key 'prefix:pre' in {TOPIC}-0 at offset {at}"):
        _store(cluster).claim_owner("pre")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    garbage=st.lists(
        st.tuples(
            st.sampled_from(list(CompressionType)),
            st.binary(max_size=200),
            st.integers(0, 3),
            st.booleans(),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_other_writers_arbitrary_batches_never_hide_the_latest_intent(
    garbage: list[tuple[CompressionType, bytes, int, bool]],
) -> None:
    """Arbitrary records sections (any codec, any claimed count, CRC valid) around the query's
    intents: ``last`` finds the latest intent, whatever they hold."""
    kafka_intents._POSITIONS.clear()
    scripted = HostileCluster(ManualClock())
    scripted.metadata = ClusterMetadata(scripted)
    scripted.put(_written(b"q", _intent("q", 1)))
    latest = 1
    for codec, section, count, then_intent in garbage:
        batch = SealedBatch(codec, count, 0, 0, max(count - 1, 0), section, 61 + len(section))
        with contextlib.suppress(CorruptRecordError):
            # Bytes that happen to decode are another writer's records: only the query's own
            # key could matter, and the strategy does not aim at it.
            decoded = decode_batch(batch.encode())
            assume(all(r.key != b"q" for r in decoded.records))
        scripted.put(batch)
        if then_intent:
            latest += 1
            scripted.put(_written(b"q", _intent("q", latest)))
    found = _store(scripted).last("q")
    assert found is not None and found.batch_id == latest
