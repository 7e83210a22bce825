"""Schemas and types a user gives that the formats refuse, through a real SparkSession.

A malformed explicit Avro schema, a recursive proto3 message and a Spark type nested past the
bound (64 levels) each fail the write on the driver with the formats' own error naming the field
path (and, for the message, its type), never a bare RecursionError or KeyError, before any record
is written: the topic stays empty.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from sparkutil import KAFKA_OPTIONS

from kafka_sink.testing.oracle import read_all

NODE_PROTO = 'syntax = "proto3";\npackage demo;\nmessage Node { int64 id = 1; Node next = 2; }\n'
NO_FIELDS = json.dumps({"type": "record", "name": "Order"})


def _deep_value(levels: int) -> str:
    inner = "id"
    for _ in range(levels):
        inner = f"named_struct('f', {inner})"
    return f"{inner} AS value"


CASES = {
    "avro-without-fields": ("avro", NO_FIELDS, "named_struct('id', id) AS value",
                            r"value: record Order has no list of 'fields'"),
    "recursive-proto3": ("protobuf", NODE_PROTO, "named_struct('id', id) AS value",
                         r"value\.next: message demo\.Node contains itself \(demo\.Node -> demo"),
    "nested-65-levels": ("jsonschema", json.dumps({"type": "object"}), _deep_value(65),
                         r"value(\.f){64}: the Spark type nests more than 64"),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_a_hostile_schema_or_type_fails_the_write_naming_the_path_before_any_record(
    spark: Any, kafka_bootstrap: str, topic_factory: Any, case: str
) -> None:
    fmt, schema, value_sql, error = CASES[case]
    topic = topic_factory(partitions=1)
    options = {
        "kafka.bootstrap.servers": kafka_bootstrap,
        **KAFKA_OPTIONS,
        "topic": topic,
        "valueFormat": fmt,
        "value.schema": schema,
    }
    df = spark.range(0, 3).selectExpr(value_sql)
    with pytest.raises(Exception, match=error) as failure:
        df.write.format("pykafka").mode("append").options(**options).save()
    assert "RecursionError" not in str(failure.value)
    assert "KeyError" not in str(failure.value)
    assert read_all(kafka_bootstrap, topic) == []
