"""``kafka.partitioner.class`` and ``kafka.interceptor.classes`` through format("pykafka").

The plugins are import paths into ``kafka_sink.testing.plugins``, resolved on the driver while
planning and instantiated on the executors; the records read back with kafka-python carry their
traces (the partition KeyDigitPartitioner picks, the header StampInterceptor adds).
"""

from __future__ import annotations

import pytest
from sparkutil import KAFKA_OPTIONS, commit_docs, committed_ranges, observed_ranges

from kafka_sink.testing import plugins as examples
from kafka_sink.testing.oracle import read_all

PARTITIONS = 3


def test_partitioner_and_interceptor_import_paths(
    spark, kafka_bootstrap, topic_factory, tmp_path
) -> None:
    topic = topic_factory(partitions=PARTITIONS)
    rows = [(None if i % 10 == 0 else str(i), f"value-{i}") for i in range(200)]
    df = spark.createDataFrame(rows, "key string, value string").repartition(2)
    (
        df.write.format("pykafka")
        .mode("append")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .options(**KAFKA_OPTIONS)
        .option("kafka.partitioner.class", "kafka_sink.testing.plugins:KeyDigitPartitioner")
        .option("kafka.interceptor.classes", "kafka_sink.testing.plugins.StampInterceptor")
        .option("topic", topic)
        .option("commitLog", str(tmp_path / "log"))
        .save()
    )
    records = read_all(kafka_bootstrap, topic, expected=len(rows))
    assert {r.value: r.key for r in records} == {
        v.encode(): None if k is None else k.encode() for k, v in rows
    }
    for record in records:
        key = record.key
        assert record.partition == (PARTITIONS - 1 if key is None else int(key) % PARTITIONS), (
            record
        )
        [(name, stamp)] = record.headers
        assert name == examples.STAMP_HEADER and int(stamp) >= 1
    [doc] = commit_docs(tmp_path / "log")
    assert committed_ranges(doc) == observed_ranges(records)


@pytest.mark.parametrize("option", ["kafka.partitioner.class", "kafka.interceptor.classes"])
def test_plugin_path_that_does_not_import_fails_on_the_driver(
    spark, kafka_bootstrap, topic_factory, option
) -> None:
    topic = topic_factory(partitions=1)
    with pytest.raises(Exception, match=rf"option '{option}': cannot import 'no_such_mod.X'") as e:
        (
            spark.range(2)
            .selectExpr("'x' AS value")
            .write.format("pykafka")
            .mode("append")
            .option("kafka.bootstrap.servers", kafka_bootstrap)
            .option(option, "no_such_mod.X")
            .option("topic", topic)
            .save()
        )
    assert "PYTHON_DATA_SOURCE_ERROR" in str(e.value)  # raised while planning, not in a task
    assert read_all(kafka_bootstrap, topic) == []
