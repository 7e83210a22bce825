"""A streaming checkpoint in a store the commit log cannot be written to: one warning, no files.

Spark writes the checkpoint through Hadoop's ``viewfs://`` (a mount table set on the running
context points it at a local directory), a scheme the sink has no client for. The sink's log
lines from the Python workers Spark starts on the driver (one plans each micro-batch, another
commits it) are caught by a subclass of the data source that adds a file handler there.
"""

from __future__ import annotations

import json
import logging
import uuid

from sparkutil import KAFKA_OPTIONS

from kafka_sink.spark.datasource import PyKafkaDataSource
from kafka_sink.testing.oracle import read_all


def test_unsupported_checkpoint_store_warns_once_and_the_query_runs(
    spark, kafka_bootstrap, topic_factory, tmp_path
) -> None:
    topic = topic_factory(partitions=1)
    log_path = str(tmp_path / "driver-workers.log")
    mount = f"pk{uuid.uuid4().hex[:8]}"
    backing = tmp_path / "viewfs-backing"
    backing.mkdir()
    spark.sparkContext._jsc.hadoopConfiguration().set(
        f"fs.viewfs.mounttable.{mount}.link./ck", backing.as_uri()
    )
    checkpoint = f"viewfs://{mount}/ck/q"

    # Defined here so that it is pickled by value: the workers cannot import this test module.
    class LoggedPyKafka(PyKafkaDataSource):
        @classmethod
        def name(cls) -> str:
            return "pykafka_logged"

        def streamWriter(self, schema, overwrite):
            logger = logging.getLogger("kafka_sink.spark")
            if not any(getattr(h, "baseFilename", "") == log_path for h in logger.handlers):
                handler = logging.FileHandler(log_path)
                handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
                logger.addHandler(handler)
                logger.setLevel(logging.INFO)
            return super().streamWriter(schema, overwrite)

    spark.dataSource.register(LoggedPyKafka)
    inputs = tmp_path / "in"
    inputs.mkdir()
    for n in range(2):
        (inputs / f"f{n}.json").write_text(
            "".join(json.dumps({"id": i}) + "\n" for i in range(n * 10, n * 10 + 10))
        )
    query = (
        spark.readStream.schema("id BIGINT")
        .option("maxFilesPerTrigger", 1)
        .json(str(inputs))
        .selectExpr("CAST(id AS STRING) AS value")
        .writeStream.format("pykafka_logged")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .options(**KAFKA_OPTIONS)
        .option("topic", topic)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    assert sorted(int(r.value) for r in read_all(kafka_bootstrap, topic, expected=20)) == list(
        range(20)
    )
    assert (backing / "q" / "commits" / "1").exists()  # Spark's own checkpoint went to viewfs
    assert not (backing / "q" / "pykafka-commits").exists()
    lines = (tmp_path / "driver-workers.log").read_text().splitlines()
    warnings = [line for line in lines if line.startswith("WARNING")]
    assert len(warnings) == 1, lines  # two micro-batches, each planned and committed
    assert f"no commit files will be written for checkpoint {checkpoint}" in warnings[0]
    assert "scheme 'viewfs'" in warnings[0] and "'commitLog'" in warnings[0]
    commits = [line for line in lines if line.startswith("INFO pykafka commit")]
    assert len(commits) == 2 and not any("; log " in line for line in commits)
