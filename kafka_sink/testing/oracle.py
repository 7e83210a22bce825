"""The test oracle: an independent Kafka client (kafka-python) that creates topics and reads back.

Tests judge our producer by what a different, widely used client reads from a real broker, so
nothing here uses ``kafka_sink``'s own protocol code. kafka-python is a test dependency: it is
imported inside the functions, so ``kafka_sink.testing`` imports without it.

Invariants:
- ``create_topic`` returns only when every broker in the bootstrap list reports a leader for every
  partition of the topic (metadata reaches brokers asynchronously; a producer bootstrapping on a
  lagging broker would otherwise see UNKNOWN_TOPIC_OR_PARTITION).
- ``read_all`` uses manual assignment (no consumer group, no committed offsets), reads every
  partition from the beginning, and returns records sorted by (partition, offset). It stops when
  ``expected`` records have arrived *and* it has caught up with the end offsets observed at that
  moment, so unexpected extra records (duplicates) are returned too, not hidden.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafka_sink.testing.probe import fetch_metadata, parse_bootstrap

__all__ = [
    "ConsumedRecord",
    "create_topic",
    "end_offsets",
    "import_kafka_python",
    "read_all",
    "wait_for_leaders",
]

_CLIENT_ID = "kafka-sink-oracle"


def import_kafka_python() -> Any:
    """Import kafka-python, silencing the DeprecationWarnings of its import-time schema loading.

    kafka-python 3.0 reads its protocol JSON with ``importlib.resources.read_text``, whose warning
    is attributed to ``importlib`` rather than ``kafka`` and so escapes module-based filters; under
    ``-W error`` (the test configuration) the import would fail.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import kafka
        import kafka.admin

    return kafka


@dataclass(frozen=True)
class ConsumedRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    timestamp_ms: int


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 1,
    replication_factor: int = 1,
    configs: Mapping[str, str] | None = None,
    *,
    timeout_s: float = 30.0,
) -> None:
    """Create ``name`` and wait until every partition has a leader on every bootstrap broker,
    and every leader answers for its partitions."""
    kafka = import_kafka_python()
    admin = kafka.admin.KafkaAdminClient(
        bootstrap_servers=bootstrap,
        client_id=_CLIENT_ID,
        request_timeout_ms=int(timeout_s * 1000),
    )
    try:
        admin.create_topics(
            [
                kafka.admin.NewTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=replication_factor,
                    topic_configs=dict(configs or {}),
                )
            ],
            timeout_ms=int(timeout_s * 1000),
        )
    finally:
        admin.close()
    wait_for_leaders(bootstrap, name, partitions, timeout_s=timeout_s)
    # A leader in the metadata may not serve the partition yet (on a loaded machine its first
    # Produce can get NOT_LEADER_OR_FOLLOWER): ListOffsets to every leader, retried until each
    # answers, ends the wait.
    end_offsets(bootstrap, name, timeout_s=timeout_s)


def wait_for_leaders(
    bootstrap: str, topic: str, partitions: int | None = None, *, timeout_s: float = 30.0
) -> None:
    """Block until every reachable bootstrap broker reports a leader for each partition.

    ``partitions`` None accepts whatever partition count the brokers report (at least one).
    Brokers that refuse connections (stopped on purpose by a test) are skipped, but at least one
    must answer.
    """
    deadline = time.monotonic() + timeout_s
    problem = "no broker answered"
    while time.monotonic() < deadline:
        problem = ""
        answered = 0
        for host, port in parse_bootstrap(bootstrap):
            try:
                view = fetch_metadata(host, port, [topic])
            except (OSError, ValueError):
                continue
            answered += 1
            state = view.topics.get(topic)
            if state is None or state.error_code != 0:
                problem = f"{host}:{port} reports {topic!r} with error {state and state.error_code}"
                break
            count = len(state.partitions)
            if count == 0 or (partitions is not None and count != partitions):
                problem = f"{host}:{port} reports {count} partitions for {topic!r}"
                break
            leaderless = [p.partition_index for p in state.partitions.values() if p.leader_id < 0]
            if leaderless:
                problem = f"{host}:{port} has no leader for {topic!r} partitions {leaderless}"
                break
        if answered == 0:
            problem = "no broker answered"
        if not problem:
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic!r} not ready after {timeout_s}s: {problem}")


def _consumer(bootstrap: str, **extra: Any) -> Any:
    return import_kafka_python().KafkaConsumer(
        bootstrap_servers=bootstrap,
        client_id=_CLIENT_ID,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **extra,
    )


def _topic_partitions(consumer: Any, topic: str, deadline: float) -> list[Any]:
    kafka = import_kafka_python()
    while True:
        parts = consumer.partitions_for_topic(topic)
        if parts:
            return [kafka.TopicPartition(topic, p) for p in sorted(parts)]
        if time.monotonic() > deadline:
            raise TimeoutError(f"no partitions known for topic {topic!r}")
        time.sleep(0.1)


def end_offsets(bootstrap: str, topic: str, *, timeout_s: float = 30.0) -> dict[int, int]:
    """The log end offset (next offset to be written) of every partition of ``topic``."""
    consumer = _consumer(bootstrap)
    try:
        tps = _topic_partitions(consumer, topic, time.monotonic() + timeout_s)
        ends = consumer.end_offsets(tps)
        return {tp.partition: int(ends[tp]) for tp in tps}
    finally:
        consumer.close()


def read_all(
    bootstrap: str,
    topic: str,
    *,
    expected: int | None = None,
    timeout_s: float = 30.0,
    isolation_level: str = "read_uncommitted",
) -> list[ConsumedRecord]:
    """Every record of ``topic`` from the beginning, sorted by (partition, offset).

    Without ``expected``: everything up to the end offsets at call time. With ``expected``: waits
    until at least that many records arrived, then drains up to the then-current end offsets.
    Raises ``TimeoutError`` (saying how many records were read) when that does not happen in time.
    With ``isolation_level="read_committed"`` aborted transactional records are skipped; control
    records never appear.
    """
    deadline = time.monotonic() + timeout_s
    consumer = _consumer(bootstrap, isolation_level=isolation_level)
    records: list[ConsumedRecord] = []
    try:
        tps = _topic_partitions(consumer, topic, deadline)
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        targets: dict[Any, int] | None = None
        while True:
            if targets is None and (expected is None or len(records) >= expected):
                # read_committed end offsets are the last stable offsets, which is what a
                # read_committed consumer can reach.
                targets = {tp: int(off) for tp, off in consumer.end_offsets(tps).items()}
            if targets is not None and all(consumer.position(tp) >= targets[tp] for tp in tps):
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                want = f"{expected}" if expected is not None else "the end offsets"
                raise TimeoutError(
                    f"read {len(records)} records from {topic!r} in {timeout_s}s, "
                    f"waiting for {want}"
                )
            batch = consumer.poll(timeout_ms=int(min(remaining, 0.5) * 1000))
            for tp_records in batch.values():
                records.extend(
                    ConsumedRecord(
                        topic=r.topic,
                        partition=r.partition,
                        offset=r.offset,
                        key=r.key,
                        value=r.value,
                        headers=[(k, v) for k, v in (r.headers or [])],
                        timestamp_ms=r.timestamp,
                    )
                    for r in tp_records
                )
    finally:
        consumer.close()
    records.sort(key=lambda r: (r.partition, r.offset))
    return records
