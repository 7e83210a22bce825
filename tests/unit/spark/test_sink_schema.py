"""The Kafka sink's input contract, checked on the driver from the DataFrame schema."""

from __future__ import annotations

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from kafka_sink.sink_errors import SinkSchemaError
from kafka_sink.spark.schema import InputLayout, validate_schema

HEADERS = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def schema(**cols) -> StructType:
    return StructType([StructField(name, dtype) for name, dtype in cols.items()])


def test_full_layout() -> None:
    layout = validate_schema(
        schema(
            key=BinaryType(),
            value=StringType(),
            topic=StringType(),
            partition=IntegerType(),
            headers=HEADERS,
            timestamp=TimestampType(),
            other=LongType(),
        ),
        None,
    )
    assert layout == InputLayout(True, True, True, True, "timestamp")


def test_topic_option_overrides_column_and_its_type() -> None:
    layout = validate_schema(schema(value=BinaryType(), topic=IntegerType()), "t")
    assert not layout.topic_column
    assert validate_schema(schema(value=BinaryType(), timestamp=LongType()), "t").timestamp == (
        "millis"
    )


@pytest.mark.parametrize(
    ("cols", "topic", "pattern"),
    [
        (
            {"key": StringType()},
            "t",
            r"required column 'value' not found \(columns: key\).*string or binary",
        ),
        ({"value": IntegerType()}, "t", r"'value' has unsupported type int.*string or binary"),
        ({"value": BinaryType(), "key": LongType()}, "t", r"'key' has unsupported type bigint"),
        ({"value": BinaryType()}, None, r"no 'topic' column and the 'topic' option is not set"),
        (
            {"value": BinaryType(), "topic": BinaryType()},
            None,
            r"'topic' has unsupported type binary.*must be string",
        ),
        (
            {"value": BinaryType(), "partition": LongType()},
            "t",
            r"'partition' has unsupported type bigint.*must be int.*CAST\(partition AS INT\)",
        ),
        (
            {"value": BinaryType(), "headers": MapType(StringType(), StringType())},
            "t",
            r"'headers' has unsupported type map<string,string>.*map_entries",
        ),
        (
            {
                "value": BinaryType(),
                "headers": ArrayType(
                    StructType(
                        [StructField("key", StringType()), StructField("value", StringType())]
                    )
                ),
            },
            "t",
            r"'headers' has unsupported type array<struct<key:string,value:string>>",
        ),
        (
            {"value": BinaryType(), "timestamp": StringType()},
            "t",
            r"'timestamp' has unsupported type string.*timestamp or bigint",
        ),
        (
            {"value": BinaryType(), "timestamp": TimestampNTZType()},
            "t",
            r"'timestamp' has unsupported type timestamp_ntz",
        ),
    ],
)
def test_bad_schemas(cols: dict, topic: str | None, pattern: str) -> None:
    with pytest.raises(SinkSchemaError, match=pattern):
        validate_schema(schema(**cols), topic)


def test_duplicate_value_column() -> None:
    dup = StructType([StructField("value", BinaryType()), StructField("value", StringType())])
    with pytest.raises(SinkSchemaError, match="'value' appears 2 times"):
        validate_schema(dup, "t")


def test_names_are_case_sensitive() -> None:
    with pytest.raises(SinkSchemaError, match="required column 'value' not found"):
        validate_schema(schema(Value=BinaryType()), "t")
