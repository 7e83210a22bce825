"""``valueFormat`` / ``keyFormat`` in the data source: options, the driver's plan, the task.

The registry is a fake client (it records its calls) handed to ``resolve_formats``; the task
runs with the fake producer of ``tests/fakes/spark.py``, and its framed payloads are compared
with fastavro's per-row encoding (through ``AvroSerializer.serialize``). The real registry,
Kafka and Spark are ``tests/spark/test_spark_formats_avro.py``'s.
"""

from __future__ import annotations

import json
import pickle
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    BinaryType,
    DecimalType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from kafka_sink.formats.avro_serializer import AvroSerializer
from kafka_sink.formats.options import FormatOptions
from kafka_sink.formats.plan import FormatPlan, resolve_formats
from kafka_sink.formats.registry import (
    CompatibilityResult,
    RegisteredSchema,
    Schema,
    SchemaRegistryConfig,
)
from kafka_sink.sink_errors import (
    IncompatibleSchemaError,
    SchemaNotFoundError,
    SinkOptionError,
    SinkSchemaError,
)
from kafka_sink.spark.executor import producer_cache
from kafka_sink.spark.options import SinkOptions
from kafka_sink.spark.schema import InputLayout, validate_schema
from kafka_sink.spark.writer import PyKafkaBatchWriter
from tests.fakes.spark import FakeProducer

URL = "http://registry.test:8081"
SECRET = "p4ss-w0rd"
ORDER = StructType(
    [
        StructField("id", IntegerType(), False),
        StructField("name", StringType(), True),
    ]
)
ORDER_JSON = ORDER.jsonValue()


class FakeClient:
    """The calls of ``SchemaRegistryClient`` the plan makes, against a dict of subjects."""

    def __init__(self, config: SchemaRegistryConfig) -> None:
        self.config = config
        self.subjects: dict[str, list[tuple[int, Schema]]] = {}
        self.calls: list[tuple[str, str]] = []
        self.incompatible: set[str] = set()

    def check_compatibility(self, subject: str, schema: Schema) -> CompatibilityResult:
        # As Apicurio answers: the verdict without its reasons.
        self.calls.append(("compatibility", subject))
        return CompatibilityResult(subject not in self.incompatible)

    def ensure_compatible(self, subject: str, schema: Schema) -> None:
        if subject in self.incompatible:
            raise IncompatibleSchemaError(subject, [], url=URL, level="BACKWARD")

    def register(self, subject: str, schema: Schema) -> int:
        self.calls.append(("register", subject))
        if subject in self.incompatible:
            raise IncompatibleSchemaError(
                subject, ["READER_FIELD_MISSING_DEFAULT_VALUE: extra"], url=URL, level="BACKWARD"
            )
        versions = self.subjects.setdefault(subject, [])
        for schema_id, known in versions:
            if known == schema:
                return schema_id
        versions.append((100 + len(self.calls), schema))
        return versions[-1][0]

    def lookup(self, subject: str, schema: Schema) -> RegisteredSchema | None:
        self.calls.append(("lookup", subject))
        for version, (schema_id, known) in enumerate(self.subjects.get(subject, []), 1):
            if known == schema:
                return RegisteredSchema(schema_id, subject, version, known)
        return None

    def latest_version(self, subject: str) -> RegisteredSchema:
        self.calls.append(("latest", subject))
        versions = self.subjects.get(subject)
        if not versions:
            raise SchemaNotFoundError("no subject", url=URL, status=404, error_code=40401)
        schema_id, schema = versions[-1]
        return RegisteredSchema(schema_id, subject, len(versions), schema)


def _formats(**options: str) -> FormatOptions:
    return FormatOptions.from_options(options)


def _plan(
    options: dict[str, str], types: dict[str, Any] | None = None, topic: str | None = "orders"
) -> tuple[FormatPlan | None, FakeClient | None]:
    made: list[FakeClient] = []

    def factory(config: SchemaRegistryConfig) -> Any:
        made.append(FakeClient(config))
        return made[-1]

    plan = resolve_formats(
        FormatOptions.from_options(options),
        types or {"value": ORDER_JSON},
        topic,
        client_factory=factory,
    )
    return plan, (made[0] if made else None)


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka_sink.formats import plan

    monkeypatch.setattr(plan, "_REGISTERED", {})


# -- options ------------------------------------------------------------------------------------


def test_formats_are_parsed_and_the_sinks_options_accept_their_keys() -> None:
    options = {
        "kafka.bootstrap.servers": "h:1",
        "valueformat": "AVRO",
        "value.subject.name.strategy": "topic_record",
        "recordname": "Order",
        "recordnamespace": "shop",
        "schema.registry.url": URL,
        "schema.registry.basic.auth.user.info": f"u:{SECRET}",
    }
    SinkOptions.from_options(options)  # no unknown option
    parsed = FormatOptions.from_options(options)
    assert parsed.value is not None and parsed.key is None
    assert (parsed.value.format, parsed.value.strategy) == ("avro", "topic_record")
    assert (parsed.record_name, parsed.record_namespace) == ("Order", "shop")
    assert parsed.registry is not None and parsed.registry.urls == (URL,)
    assert parsed.auto_register and not parsed.use_latest_version
    assert SECRET not in repr(parsed)


def test_without_a_format_nothing_changes() -> None:
    assert _formats() == FormatOptions()
    assert resolve_formats(FormatOptions(), {"value": "binary"}, "t") is None


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"valueformat": "protobuf"}, "'valueFormat=protobuf' needs 'schema.registry.url'"),
        ({"keyformat": "json"}, "option 'keyFormat'"),
        ({"value.schema": "{}"}, "need 'valueFormat'"),
        ({"key.subject.name.strategy": "record"}, "need 'keyFormat'"),
        ({"schema.registry.url": URL}, "neither 'valueFormat' nor 'keyFormat'"),
        ({"valueformat": "avro", "schema.registry.uri": URL}, "schema.registry.uri"),
        ({"valueformat": "avro", "value.subject.name.strategy": "x"}, "topic_record"),
        ({"valueformat": "avro", "auto.register.schemas": "yes"}, "auto.register.schemas"),
        ({"valueformat": "avro", "use.latest.version": "true"}, "'schema.registry.url' is not"),
        (
            {
                "valueformat": "avro",
                "use.latest.version": "true",
                "value.schema": '"long"',
                "schema.registry.url": URL,
            },
            "value.schema",
        ),
        (
            {
                "valueformat": "avro",
                "use.latest.version": "true",
                "auto.register.schemas": "true",
                "schema.registry.url": URL,
            },
            "contradict",
        ),
    ],
)
def test_bad_format_options_are_refused_naming_the_option(
    options: dict[str, str], named: str
) -> None:
    with pytest.raises(SinkOptionError, match=named):
        FormatOptions.from_options(options)


def test_registry_errors_name_no_secret() -> None:
    with pytest.raises(SinkOptionError) as caught:
        _formats(
            valueformat="avro",
            **{
                "schema.registry.url": f"http://u:{SECRET}@h:1",
                "schema.registry.basic.auth.user.info": f"u:{SECRET}",
            },
        )
    assert SECRET not in str(caught.value)


def test_a_serialized_column_may_have_any_spark_type() -> None:
    schema = StructType([StructField("value", ORDER), StructField("key", ORDER)])
    with pytest.raises(SinkSchemaError, match="column 'value'"):
        validate_schema(schema, "t")
    with pytest.raises(SinkSchemaError, match="column 'key'"):
        validate_schema(schema, "t", ("value",))
    assert validate_schema(schema, "t", ("value", "key")).key_column
    plain = StructType([StructField("value", BinaryType())])
    assert not validate_schema(plain, "t", ("value",)).key_column


# -- the driver's plan --------------------------------------------------------------------------


def test_without_a_registry_the_derived_schema_is_written_plain() -> None:
    plan, client = _plan({"valueformat": "avro"})
    assert client is None and plan is not None and plan.key is None
    assert plan.value is not None and plan.value.schema_id is None
    assert plan.value.schema.json == {
        "type": "record",
        "name": "topLevelRecord",
        "fields": [{"name": "id", "type": "int"}, {"name": "name", "type": ["string", "null"]}],
    }
    assert pickle.loads(pickle.dumps(plan)).value.schema.json == plan.value.schema.json


def test_a_registry_registers_under_the_topic_subject_once_per_schema() -> None:
    options = {"valueformat": "avro", "keyformat": "avro", "schema.registry.url": URL}
    types = {"value": ORDER_JSON, "key": "string"}
    plan, client = _plan(options, types)
    assert plan is not None and client is not None
    assert plan.value is not None and plan.key is not None
    assert (plan.value.subject, plan.key.subject) == ("orders-value", "orders-key")
    assert client.calls == [
        ("compatibility", "orders-value"),
        ("register", "orders-value"),
        ("compatibility", "orders-key"),
        ("register", "orders-key"),
    ]
    assert plan.value.schema_id == client.subjects["orders-value"][0][0]
    # The next micro-batch's planning, in the same driver process, asks nothing.
    again, second = _plan(options, types)
    assert second is not None and second.calls == []
    assert again is not None and again.value is not None
    assert again.value.schema_id == plan.value.schema_id


def test_the_plan_the_tasks_get_carries_no_registry_connection_or_secret() -> None:
    options = {
        "valueformat": "avro",
        "schema.registry.url": "http://registry.test:8081",
        "schema.registry.basic.auth.user.info": f"svc:{SECRET}",
    }
    plan, client = _plan(options)
    assert client is not None and client.config.user_info == f"svc:{SECRET}"
    shipped = pickle.dumps(plan)
    assert SECRET.encode() not in shipped and b"registry.test" not in shipped
    assert SECRET not in repr(plan)


def test_record_strategies_name_the_subject_after_the_record() -> None:
    options = {
        "valueformat": "avro",
        "schema.registry.url": URL,
        "recordname": "Order",
        "recordnamespace": "shop",
        "value.subject.name.strategy": "topic_record",
    }
    plan, _ = _plan(options)
    assert plan is not None and plan.value is not None
    assert plan.value.subject == "orders-shop.Order"
    options["value.subject.name.strategy"] = "record"
    plan, _ = _plan(options, topic=None)  # the topic column is fine: the subject ignores it
    assert plan is not None and plan.value is not None and plan.value.subject == "shop.Order"


def test_a_topic_column_with_a_topic_subject_and_no_topics_option_is_refused() -> None:
    with pytest.raises(
        SinkOptionError, match=r"value\.subject\.name\.strategy=topic .*'topic' opt"
    ):
        _plan({"valueformat": "avro", "schema.registry.url": URL}, topic=None)


def test_an_incompatible_schema_is_refused_before_registering() -> None:
    def factory(config: SchemaRegistryConfig) -> Any:
        client = FakeClient(config)
        client.incompatible.add("orders-value")
        made.append(client)
        return client

    made: list[FakeClient] = []
    reason = r"'orders-value'.*BACKWARD.*READER_FIELD_MISSING_DEFAULT_VALUE.*Fix:"
    with pytest.raises(IncompatibleSchemaError, match=reason):
        resolve_formats(
            _formats(valueformat="avro", **{"schema.registry.url": URL}),
            {"value": ORDER_JSON},
            "orders",
            client_factory=factory,
        )
    # The refused registration is what gives the reason; nothing else is registered.
    assert made[0].calls == [("compatibility", "orders-value"), ("register", "orders-value")]
    assert made[0].subjects == {}


def test_a_mismatched_explicit_schema_is_refused_naming_the_field_path() -> None:
    schema = {
        "type": "record",
        "name": "Order",
        "fields": [{"name": "id", "type": "int"}, {"name": "name", "type": "int"}],
    }
    with pytest.raises(SinkSchemaError, match=r"value\.name: Spark type string .* Avro int"):
        _plan({"valueformat": "avro", "value.schema": json.dumps(schema)})


def test_a_missing_value_column_is_named() -> None:
    with pytest.raises(SinkSchemaError, match="no 'key' column"):
        _plan({"keyformat": "avro"})


def test_without_auto_register_the_schema_must_be_there() -> None:
    with pytest.raises(SinkSchemaError, match="'orders-value' schema is not registered"):
        _plan({"valueformat": "avro", "schema.registry.url": URL, "auto.register.schemas": "false"})


def test_use_latest_version_binds_the_registered_schema() -> None:
    latest = {
        "type": "record",
        "name": "Order",
        "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": ["null", "string"]}],
    }

    def factory(config: SchemaRegistryConfig) -> Any:
        client = FakeClient(config)
        client.subjects["orders-value"] = [(7, Schema(json.dumps(latest)))]
        return client

    plan = resolve_formats(
        _formats(valueformat="avro", **{"schema.registry.url": URL, "use.latest.version": "true"}),
        {"value": ORDER_JSON},
        "orders",
        client_factory=factory,
    )
    assert plan is not None and plan.value is not None
    assert (plan.value.schema_id, plan.value.schema.json) == (7, latest)


# -- the task -----------------------------------------------------------------------------------


@pytest.fixture
def fake_producers(monkeypatch: pytest.MonkeyPatch) -> Any:
    FakeProducer.instances = []
    producer_cache.close_all()
    monkeypatch.setattr(producer_cache, "_create", FakeProducer)
    yield FakeProducer.instances
    producer_cache.close_all()


def test_a_task_sends_framed_avro_equal_to_the_per_row_library(fake_producers: Any) -> None:
    types = {
        "value": StructType(
            [
                StructField("id", IntegerType(), False),
                StructField("name", StringType(), True),
                StructField("price", DecimalType(9, 2)),
            ]
        ).jsonValue()
    }
    plan, _ = _plan({"valueformat": "avro", "schema.registry.url": URL}, types)
    assert plan is not None and plan.value is not None and plan.value.schema_id is not None
    rows = [
        {"id": 1, "name": "zoë", "price": Decimal("-0.01")},
        {"id": -(2**31), "name": None, "price": Decimal("9999999.99")},
    ]
    values = pa.array(
        [*rows, None],
        pa.struct(
            [
                pa.field("id", pa.int32(), nullable=False),
                pa.field("name", pa.string()),
                pa.field("price", pa.decimal128(9, 2)),
            ]
        ),
    )
    writer = PyKafkaBatchWriter(
        SinkOptions.from_options({"kafka.bootstrap.servers": "h:1", "topic": "orders"}),
        InputLayout(False, False, False, False, None),
        streaming=False,
        overwrite=False,
        write_id="w1",
        formats=pickle.loads(pickle.dumps(plan)),
    )
    writer.write(iter([pa.record_batch({"value": values})]))
    [producer] = fake_producers
    [call] = producer.calls
    expected = AvroSerializer(plan.value.schema, schema_id=plan.value.schema_id)
    assert call["values"] == [expected.serialize(row) for row in rows] + [None]
    assert call["values"][0][:5] == b"\x00" + plan.value.schema_id.to_bytes(4, "big")
