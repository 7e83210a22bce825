"""Transaction scenarios shared by the broker tests of Transactions V2 (the session broker) and
V1 (a cluster formatted with ``transaction.version=1``); kafka-python reads back as an
independent consumer, read_committed and read_uncommitted.

``prepare_in_another_process`` runs ``txn_prepare_child.py`` in a separate Python process: our
KafkaProducer writes a transaction there, prepares it and exits; the test process gets the
unpickled ``PreparedTransaction`` and the records written."""

from __future__ import annotations

import base64
import pickle
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from kafka_sink import KafkaProducer
from kafka_sink.admin.transactions import complete_transaction, list_transactions
from kafka_sink.errors import ProducerFencedError
from kafka_sink.prepared import PreparedTransaction
from kafka_sink.testing.oracle import create_topic, import_kafka_python, read_all

_CHILD = Path(__file__).with_name("txn_prepare_child.py")
Record = tuple[str, int, bytes]  # topic, partition, value

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


def prepare_in_another_process(
    bootstrap: str,
    transactional_id: str,
    topic_a: str,
    topic_b: str,
    *,
    count: int,
    timeout_ms: int = 60_000,
) -> tuple[PreparedTransaction, list[Record]]:
    """A transaction prepared (not ended) by KafkaProducer in a separate process that exited:
    ``count`` records by ``send()`` over partitions 0-2 of ``topic_a`` and ``count`` by
    ``send_columns()`` over partitions 0-1 of ``topic_b``. Returns its handle and records."""
    child = subprocess.run(
        [
            sys.executable,
            str(_CHILD),
            bootstrap,
            transactional_id,
            topic_a,
            topic_b,
            str(count),
            str(timeout_ms),
        ],
        timeout=120,
        capture_output=True,
        text=True,
        check=False,
    )
    assert child.returncode == 0, f"the preparing process failed:\n{child.stderr[-3000:]}"
    prepared = pickle.loads(base64.b64decode(child.stdout.strip().splitlines()[-1]))
    assert isinstance(prepared, PreparedTransaction)
    written = [(topic_a, i % 3, f"{transactional_id}-a-{i}".encode()) for i in range(count)]
    written += [(topic_b, i % 2, f"{transactional_id}-b-{i}".encode()) for i in range(count)]
    return prepared, sorted(written)


def describe(bootstrap: str, transactional_id: str) -> tuple[str, int, int]:
    """(state, producer id, epoch) of ``transactional_id`` as its coordinator describes it."""
    (listing,) = list_transactions({"bootstrap.servers": bootstrap}, transactional_id, timeout=30)
    return listing.state, listing.producer_id, listing.producer_epoch


def write_after(bootstrap: str, topic: str, partitions: int) -> list[Record]:
    """A plain record on every partition: a read_committed read that reaches them proves no
    transaction before them is still open (the last stable offset passed it)."""
    kafka = import_kafka_python()
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for partition in range(partitions):
            producer.send(topic, value=b"after", partition=partition).get(timeout=30)
    finally:
        producer.close()
    return [(topic, p, b"after") for p in range(partitions)]


def read_records(
    bootstrap: str, topics: list[str], isolation_level: str, expected: list[Record]
) -> list[Record]:
    """Every record of ``topics`` (waiting until at least as many as ``expected`` per topic)."""
    out: list[Record] = []
    for topic in topics:
        wanted = sum(1 for t, _p, _v in expected if t == topic)
        records = read_all(bootstrap, topic, expected=wanted, isolation_level=isolation_level)
        out.extend((topic, r.partition, r.value or b"") for r in records)
    return sorted(out)


def commit_prepared_in_another_process(
    bootstrap: str, make_topic: TopicMaker, expected_transaction_version: int
) -> None:
    """Prepared by KafkaProducer in another process (send and send_columns, two topics, five
    partitions), committed here with complete_transaction, then committed again: read_committed
    sees exactly those records. Transactions V2 returns the bumped epoch, V1 None."""
    a, b = make_topic(3), make_topic(2)
    tid = new_id("txn-xproc")
    prepared, written = prepare_in_another_process(bootstrap, tid, a, b, count=6)
    assert (prepared.transactional_id, prepared.partitions) == (
        tid,
        tuple(sorted([(a, 0), (a, 1), (a, 2), (b, 0), (b, 1)])),
    )
    # The process is gone and close() did not end it: still open, with that producer id and epoch.
    assert describe(bootstrap, tid) == ("Ongoing", prepared.producer_id, prepared.producer_epoch)
    assert read_records(bootstrap, [a, b], "read_committed", []) == []

    config = {"bootstrap.servers": bootstrap}
    expected = (
        (prepared.producer_id, prepared.producer_epoch + 1)
        if expected_transaction_version >= 2
        else None
    )
    assert complete_transaction(config, prepared, commit=True, timeout=30) == expected
    # A retried commit after the success (its answer lost, say) succeeds too.
    assert complete_transaction(config, prepared, commit=True, timeout=30) == expected
    after = write_after(bootstrap, a, 3) + write_after(bootstrap, b, 2)
    everything = sorted(written + after)
    assert read_records(bootstrap, [a, b], "read_committed", everything) == everything
    assert describe(bootstrap, tid)[0] == "CompleteCommit"
