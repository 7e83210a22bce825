"""Spark's own ``from_avro`` reads the sink's Avro: the payload after the 5-byte header.

A second independent reader of ``valueFormat=avro`` (besides confluent-kafka's deserializer in
``test_spark_formats_avro.py``): the JVM's Avro decoder of the spark-avro jar (``spark_avro``).
Rows with a struct ``value`` (ints, a nullable unicode string, a decimal, a timestamp, an array)
are written with a registry, read back from Kafka as bytes (read_committed), the wire-format
header checked and dropped with ``substring(value, 6)``, decoded by ``from_avro`` with the
registered schema, and compared with the input rows in Spark.
"""

from __future__ import annotations

from typing import Any

import pytest
from sparkutil import KAFKA_OPTIONS
from test_spark_formats_avro import VALUE_SQL

from kafka_sink.formats.registry import SchemaRegistryClient
from kafka_sink.formats.wire_format import parse_header
from kafka_sink.testing import LocalSchemaRegistry
from kafka_sink.testing.oracle import read_all

ROWS = 200


@pytest.mark.slow
def test_from_avro_after_the_header_reads_the_input_rows(
    spark_avro: Any,
    kafka_bootstrap: str,
    topic_factory: Any,
    schema_registry: LocalSchemaRegistry,
) -> None:
    from pyspark.sql.avro.functions import from_avro
    from pyspark.sql.functions import expr

    spark = spark_avro
    topic = topic_factory(partitions=2)
    rows = spark.range(0, ROWS).selectExpr(VALUE_SQL)
    rows.write.format("pykafka").mode("append").options(
        **{
            "kafka.bootstrap.servers": kafka_bootstrap,
            **KAFKA_OPTIONS,
            "topic": topic,
            "valueFormat": "avro",
            "schema.registry.url": schema_registry.url,
            "deliveryGuarantee": "exactly-once",
        }
    ).save()

    registered = SchemaRegistryClient.from_options(
        {"schema.registry.url": schema_registry.url}
    ).latest_version(f"{topic}-value")
    records = read_all(kafka_bootstrap, topic, expected=ROWS, isolation_level="read_committed")
    assert {parse_header(r.value) for r in records} == {(registered.schema_id, 5)}
    payloads = spark.createDataFrame([(r.value,) for r in records], "value BINARY")
    decoded = payloads.select(
        from_avro(expr("substring(value, 6)"), registered.schema.schema_str).alias("value")
    )
    assert decoded.count() == ROWS
    # Both ways empty: the same multiset of rows, every field equal as Spark compares them.
    assert decoded.exceptAll(rows).count() == 0
    assert rows.exceptAll(decoded).count() == 0
    got = sorted(decoded.select("value.*").collect())
    assert got == sorted(rows.select("value.*").collect())
