"""``valueFormat=protobuf`` in the data source: options, the driver's plan, a task's bytes.

The registry is the fake of ``test_sink_formats``; the task's producer is the fake producer.
"""

from __future__ import annotations

import pickle
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import DecimalType, IntegerType, StringType, StructField, StructType

from kafka_sink.formats.options import FormatOptions
from kafka_sink.formats.plan import resolve_formats
from kafka_sink.formats.protobuf_schema import ProtoSchema
from kafka_sink.formats.protobuf_serializer import ProtobufSerializer
from kafka_sink.formats.registry import Schema, SchemaRegistryConfig
from kafka_sink.sink_errors import SinkSchemaError
from kafka_sink.spark.options import SinkOptions
from kafka_sink.spark.schema import InputLayout
from kafka_sink.spark.writer import PyKafkaBatchWriter
from tests.unit.spark.test_sink_formats import URL, FakeClient, _plan, fake_producers

__all__ = ["fake_producers"]  # the fixture, shared with the Avro tests

ORDER = StructType(
    [
        StructField("id", IntegerType(), False),
        StructField("name", StringType(), True),
        StructField("price", DecimalType(9, 2)),
    ]
).jsonValue()
ORDER_ARROW = pa.struct(
    [
        pa.field("id", pa.int32(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("price", pa.decimal128(9, 2)),
    ]
)
ORDER_PROTO = """syntax = "proto3";
package shop;
message Order {
  int32 id = 1;
  optional string name = 2;
  optional string price = 3;
}
"""


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka_sink.formats import plan

    monkeypatch.setattr(plan, "_REGISTERED", {})


def _write(plan: Any, values: pa.Array, producers: Any) -> list[bytes | None]:
    writer = PyKafkaBatchWriter(
        SinkOptions.from_options({"kafka.bootstrap.servers": "h:1", "topic": "orders"}),
        InputLayout(False, False, False, False, None),
        streaming=False,
        overwrite=False,
        write_id="w1",
        formats=pickle.loads(pickle.dumps(plan)),
    )
    writer.write(iter([pa.record_batch({"value": values})]))
    [producer] = producers
    [call] = producer.calls
    out: list[bytes | None] = call["values"]
    return out


ROWS = [
    {"id": 1, "name": "zoë", "price": Decimal("-0.01")},
    {"id": 0, "name": None, "price": Decimal("9999999.99")},
]


def test_a_task_sends_framed_protobuf_registered_once_as_protobuf(fake_producers: Any) -> None:
    options = {"valueformat": "protobuf", "schema.registry.url": URL, "recordname": "Order"}
    plan, client = _plan(options, {"value": ORDER})
    assert plan is not None and plan.value is not None and client is not None
    assert plan.value.schema_id is not None and isinstance(plan.value.schema, ProtoSchema)
    [(_, registered)] = client.subjects["orders-value"]
    assert registered == Schema(plan.value.schema.text, "PROTOBUF")
    assert client.calls == [("compatibility", "orders-value"), ("register", "orders-value")]
    _, second = _plan(options, {"value": ORDER})
    assert second is not None and second.calls == []
    values = pa.array([*ROWS, None], ORDER_ARROW)
    sent = _write(plan, values, fake_producers)
    expected = ProtobufSerializer(plan.value.schema, plan.value.schema_id)
    assert sent == [expected(row) for row in ROWS] + [None]
    assert sent[0] is not None
    assert sent[0][:6] == b"\x00" + plan.value.schema_id.to_bytes(4, "big") + b"\x00"


def test_an_explicit_proto_without_a_registry_writes_plain_payloads(fake_producers: Any) -> None:
    plan, client = _plan({"valueformat": "protobuf", "value.schema": ORDER_PROTO}, {"value": ORDER})
    assert client is None and plan is not None and plan.value is not None
    assert plan.value.schema_id is None
    sent = _write(plan, pa.array(ROWS, ORDER_ARROW), fake_producers)
    from kafka_sink.formats.protobuf_descriptor import message_class

    order = message_class(ORDER_PROTO)
    assert sent == [
        order(id=1, name="zoë", price="-0.01").SerializeToString(),
        order(price="9999999.99").SerializeToString(),
    ]


def test_an_explicit_proto_the_spark_type_cannot_write_is_refused_naming_the_path() -> None:
    wrong = ORDER_PROTO.replace("int32 id = 1", "string id = 1")
    with pytest.raises(SinkSchemaError, match=r"value\.id: Spark type int cannot be written"):
        _plan({"valueformat": "protobuf", "value.schema": wrong}, {"value": ORDER})
    with pytest.raises(SinkSchemaError, match=r"does not compile: schema\.proto:3"):
        _plan({"valueformat": "protobuf", "value.schema": "syntax = 'proto3';\n\nmessage {"})
    enum = ORDER_PROTO.replace("int32 id = 1", "sint32 id = 1")
    with pytest.raises(SinkSchemaError, match=r"value\.id: Protobuf field type 17"):
        _plan({"valueformat": "protobuf", "value.schema": enum}, {"value": ORDER})


def test_use_latest_version_takes_the_registered_proto() -> None:
    def factory(config: SchemaRegistryConfig) -> Any:
        client = FakeClient(config)
        client.subjects["orders-value"] = [(7, Schema(ORDER_PROTO, "PROTOBUF"))]
        return client

    options = {"valueformat": "protobuf", "schema.registry.url": URL, "use.latest.version": "true"}
    plan = resolve_formats(
        FormatOptions.from_options(options), {"value": ORDER}, "orders", client_factory=factory
    )
    assert plan is not None and plan.value is not None
    assert isinstance(plan.value.schema, ProtoSchema)
    assert (plan.value.schema_id, plan.value.schema.text) == (7, ORDER_PROTO)
    assert plan.value.schema.full_name == "shop.Order"

    def avro(config: SchemaRegistryConfig) -> Any:
        client = FakeClient(config)
        client.subjects["orders-value"] = [(8, Schema('"long"'))]
        return client

    with pytest.raises(SinkSchemaError, match="is a AVRO schema, not PROTOBUF"):
        resolve_formats(
            FormatOptions.from_options(options), {"value": ORDER}, "orders", client_factory=avro
        )
