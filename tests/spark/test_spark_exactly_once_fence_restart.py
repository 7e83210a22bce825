"""deliveryGuarantee=exactly-once: a streaming query started again inside one application (what
a Spark Connect server or a notebook does: the same SparkSession, the query stopped and started
anew) after another driver took its fence in between.

The query runs to the end of its input in this test's SparkSession (application A), whose
driver keeps the fence's token in its Spark local directory. Then another application takes the
fence (an InitProducerId on ``<prefix>.fence``, as its driver's planning does), and A starts the
query again on new input. The restart must take the fence back rather than fail on the token it
kept: every row is read once by an independent read_committed consumer (kafka-python), nothing
of the prefix is left open, and the other holder's epoch is fenced.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sparkutil import assert_nothing_left_open, id_stream, write_available_now

from kafka_sink.admin.transactions import TransactionAdmin
from kafka_sink.testing.oracle import read_all

# A restart proof of three streaming runs: `-m "not slow"` leaves it out, CI runs it.
pytestmark = pytest.mark.slow

TopicFactory = Callable[..., str]
ROWS = 100


def test_a_query_started_again_after_another_driver_took_its_fence_writes_once(
    spark: Any, kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    from pyspark.sql import functions as sf

    topic = topic_factory(partitions=2)
    prefix = f"eos-refence-{uuid.uuid4().hex[:8]}"
    inputs = tmp_path / "in"
    checkpoint = tmp_path / "checkpoint"
    options = {
        "kafka.bootstrap.servers": kafka_bootstrap,
        "topic": topic,
        "deliveryGuarantee": "exactly-once",
        "transactionalIdPrefix": prefix,
    }

    stream = id_stream(spark, inputs, {"a": range(0, ROWS)})
    values = stream.select(sf.col("id").cast("string").alias("value"))

    def run() -> None:
        write_available_now(values, options, checkpoint)

    run()
    assert (
        len(read_all(kafka_bootstrap, topic, expected=ROWS, isolation_level="read_committed"))
        == ROWS
    )

    # Another application takes the query's fence (its driver's first planning does this).
    with TransactionAdmin({"bootstrap.servers": kafka_bootstrap}) as admin:
        other = admin.init_producer_id(f"{prefix}.fence")
        # A starts the query again, in the same SparkSession, on new input.
        _add(inputs, "b", range(ROWS, 2 * ROWS))
        run()
        now = admin.describe([f"{prefix}.fence"])[f"{prefix}.fence"]
    assert now is not None and (now.producer_id, now.producer_epoch) != other

    committed = read_all(
        kafka_bootstrap, topic, expected=2 * ROWS, isolation_level="read_committed"
    )
    counts = Counter(int(r.value) for r in committed)
    assert set(counts) == set(range(2 * ROWS))
    assert max(counts.values()) == 1, "a row was read twice"
    assert_nothing_left_open(kafka_bootstrap, topic, prefix)


def _add(directory: Path, name: str, ids: range) -> None:
    """One input file, written aside and renamed in (the file source never reads it partly)."""
    lines = "".join(json.dumps({"id": i}) + "\n" for i in ids)
    (directory / f".{name}.tmp").write_text(lines, encoding="utf-8")
    (directory / f".{name}.tmp").rename(directory / f"{name}.json")
