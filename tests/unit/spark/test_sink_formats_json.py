"""``valueFormat=jsonschema`` and the ``topics`` option in the data source: options, plan, task.

The registry is ``test_sink_formats``'s fake client (it records its calls); the task runs with
the fake producer of ``tests/fakes/spark.py``. A JSON payload is compared with the row's values
parsed back (``json.loads``) after its wire-format header; the real registry, Kafka and Spark
are ``tests/spark/test_spark_formats_json.py``'s.
"""

from __future__ import annotations

import json
import pickle
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from kafka_sink.formats.json_schema import DRAFT_07
from kafka_sink.formats.options import FormatOptions
from kafka_sink.formats.plan import FormatPlan, resolve_formats
from kafka_sink.formats.registry import Schema, SchemaRegistryConfig
from kafka_sink.formats.wire_format import parse_header
from kafka_sink.sink_errors import SinkDataError, SinkOptionError, SinkSchemaError
from kafka_sink.spark.options import SinkOptions
from kafka_sink.spark.schema import InputLayout
from kafka_sink.spark.writer import PyKafkaBatchWriter
from tests.fakes.spark import FakeProducer
from tests.unit.spark.test_sink_formats import (  # the fixtures apply here too
    URL,
    FakeClient,
    _fresh_cache,  # noqa: F401
    _plan,
    fake_producers,  # noqa: F401
)

ORDER = StructType(
    [StructField("id", IntegerType(), False), StructField("name", StringType(), True)]
)
ARROW_ORDER = pa.struct([pa.field("id", pa.int32(), nullable=False), pa.field("name", pa.string())])
DERIVED = {
    "$schema": DRAFT_07,
    "title": "topLevelRecord",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"oneOf": [{"type": "null"}, {"type": "string"}]},
    },
    "required": ["id"],
}


def _write(plan: FormatPlan, batch: pa.RecordBatch, topic: str | None) -> list[dict[str, Any]]:
    options = {"kafka.bootstrap.servers": "h:1", **({"topic": topic} if topic else {})}
    writer = PyKafkaBatchWriter(
        SinkOptions.from_options(options),
        InputLayout(topic is None, False, False, False, None),
        streaming=False,
        overwrite=False,
        write_id="w1",
        formats=pickle.loads(pickle.dumps(plan)),
    )
    writer.write(iter([batch]))
    [producer] = FakeProducer.instances
    calls: list[dict[str, Any]] = producer.calls
    return calls


def _decoded(payload: bytes) -> tuple[int, Any]:
    schema_id, offset = parse_header(payload)
    return schema_id, json.loads(payload[offset:])


# -- options --------------------------------------------------------------------------------


def test_jsonschema_is_a_format_and_topics_a_format_option() -> None:
    options = {
        "kafka.bootstrap.servers": "h:1",
        "valueFormat": "jsonschema",
        "schema.registry.url": URL,
        "topics": " a, b ,a",
    }
    SinkOptions.from_options(options)  # no unknown option
    parsed = FormatOptions.from_options(options)
    assert parsed.value is not None and parsed.value.format == "jsonschema"
    assert parsed.topics == ("a", "b")


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"valueformat": "jsonschema"}, "'valueFormat=jsonschema' needs 'schema.registry.url'"),
        ({"keyformat": "jsonschema"}, "'keyFormat=jsonschema' needs"),
        (
            {"valueformat": "jsonschema", "value.schema": "{}", "recordnamespace": "shop"},
            "'recordNamespace'",
        ),
        ({"valueformat": "avro", "topics": " , "}, "option 'topics' is empty"),
        ({"valueformat": "jsonschema", "value.schema": " "}, "a JSON Schema"),
    ],
)
def test_bad_json_options_are_refused_naming_the_option(
    options: dict[str, str], named: str
) -> None:
    with pytest.raises(SinkOptionError, match=named):
        FormatOptions.from_options(options)


# -- the driver's plan ----------------------------------------------------------------------


def test_a_derived_json_schema_is_registered_as_json_under_the_topic_subject() -> None:
    plan, client = _plan({"valueformat": "jsonschema", "schema.registry.url": URL})
    assert plan is not None and plan.value is not None and client is not None
    assert (plan.value.format, plan.value.subject) == ("jsonschema", "orders-value")
    assert plan.value.schema.json == DERIVED
    [(schema_id, registered)] = client.subjects["orders-value"]
    assert registered == Schema(json.dumps(DERIVED, separators=(",", ":")), "JSON")
    assert plan.value.schema_id == schema_id


def test_the_record_strategy_takes_the_json_schemas_title() -> None:
    options = {
        "valueformat": "jsonschema",
        "schema.registry.url": URL,
        "recordname": "Order",
        "value.subject.name.strategy": "topic_record",
    }
    plan, _ = _plan(options)
    assert plan is not None and plan.value is not None
    assert plan.value.subject == "orders-Order"


def test_an_explicit_json_schema_the_column_does_not_fit_is_refused_naming_the_path() -> None:
    schema = {"type": "object", "properties": {"name": {"type": "integer"}}}
    options = {"valueformat": "jsonschema", "value.schema": json.dumps(schema)}
    with pytest.raises(SinkSchemaError, match=r"value\.name: Spark type string .* integer"):
        _plan(options)


def test_use_latest_version_refuses_a_subject_of_another_type() -> None:
    client = FakeClient(SchemaRegistryConfig.from_options({"schema.registry.url": URL}))
    options = FormatOptions.from_options(
        {"valueformat": "jsonschema", "schema.registry.url": URL, "use.latest.version": "true"}
    )

    def plan_with(latest: Schema) -> FormatPlan | None:
        client.subjects["orders-value"] = [(8, latest)]
        types = {"value": ORDER.jsonValue()}
        return resolve_formats(options, types, "orders", client_factory=lambda _: client)

    with pytest.raises(SinkSchemaError, match="is a AVRO schema, not JSON"):
        plan_with(Schema('"long"'))
    plan = plan_with(Schema(json.dumps(DERIVED), "JSON"))
    assert plan is not None and plan.value is not None
    assert (plan.value.schema_id, plan.value.schema.json) == (8, DERIVED)


def test_topics_give_one_subject_per_topic_under_the_strategy() -> None:
    options = {"valueformat": "jsonschema", "schema.registry.url": URL, "topics": "a,b"}
    plan, client = _plan(options, topic=None)
    assert plan is not None and plan.value is not None and client is not None
    assert [(t, c.subject) for t, c in plan.value.by_topic] == [("a", "a-value"), ("b", "b-value")]
    assert [c for c in client.calls if c[0] == "register"] == [
        ("register", "a-value"),
        ("register", "b-value"),
    ]
    options["value.subject.name.strategy"] = "topic_record"
    plan, _ = _plan({**options, "recordname": "Order"}, topic=None)
    assert plan is not None and plan.value is not None
    assert [c.subject for _, c in plan.value.by_topic] == ["a-Order", "b-Order"]


def test_a_topic_column_without_topics_is_refused_naming_the_option() -> None:
    with pytest.raises(SinkOptionError, match=r"\.option\('topics', 'a,b'\)"):
        _plan({"valueformat": "jsonschema", "schema.registry.url": URL}, topic=None)


def test_topics_with_the_topic_option_is_refused() -> None:
    with pytest.raises(SinkOptionError, match=r"'topics'.*'topic' option is set"):
        _plan({"valueformat": "avro", "topics": "a"}, topic="orders")


# -- the task -------------------------------------------------------------------------------

ROWS = [{"id": 1, "name": 'zoë "q"\n'}, {"id": -(2**31), "name": None}]


@pytest.mark.usefixtures("fake_producers")
def test_a_task_sends_framed_json_of_the_rows() -> None:
    plan, _ = _plan({"valueformat": "jsonschema", "schema.registry.url": URL})
    assert plan is not None and plan.value is not None
    values = pa.array([*ROWS, None], ARROW_ORDER)
    [call] = _write(plan, pa.record_batch({"value": values}), "orders")
    assert [_decoded(v) for v in call["values"][:2]] == [(plan.value.schema_id, r) for r in ROWS]
    assert call["values"][2] is None


@pytest.mark.usefixtures("fake_producers")
def test_without_a_registry_a_given_schema_writes_plain_json() -> None:
    plan, _ = _plan({"valueformat": "jsonschema", "value.schema": json.dumps(DERIVED)})
    assert plan is not None and plan.value is not None and plan.value.schema_id is None
    [call] = _write(plan, pa.record_batch({"value": pa.array(ROWS, ARROW_ORDER)}), "orders")
    assert [json.loads(v) for v in call["values"]] == ROWS


@pytest.mark.usefixtures("fake_producers")
def test_each_topics_rows_are_framed_with_its_subjects_id() -> None:
    options = {"valueformat": "avro", "schema.registry.url": URL, "topics": "a,b,c"}
    plan, client = _plan(options, topic=None)
    assert plan is not None and plan.value is not None and client is not None
    ids = {t: c.schema_id for t, c in plan.value.by_topic}
    assert len(set(ids.values())) == 3  # the fake gives each subject its own id
    topics = ["b", "a", "b", "c", "a"]
    batch = pa.record_batch(
        {"value": pa.array([{"id": i, "name": str(i)} for i in range(5)], ARROW_ORDER),
         "topic": pa.array(topics)}
    )  # fmt: skip
    calls = _write(plan, batch, None)
    sent = {(c["topic"], parse_header(v)[0], v[-1:]) for c in calls for v in c["values"]}
    assert sent == {(t, ids[t], str(i).encode()) for i, t in enumerate(topics)}


@pytest.mark.usefixtures("fake_producers")
def test_a_row_whose_topic_is_not_listed_fails_the_task_naming_it() -> None:
    options = {"valueformat": "jsonschema", "schema.registry.url": URL, "topics": "a,b"}
    plan, _ = _plan(options, topic=None)
    assert plan is not None
    batch = pa.record_batch(
        {"value": pa.array(ROWS, ARROW_ORDER), "topic": pa.array(["a", "elsewhere"])}
    )
    with pytest.raises(SinkDataError, match=r"topic 'elsewhere' is not in option 'topics'"):
        _write(plan, batch, None)


def test_a_derived_key_schema_error_names_the_key_column() -> None:
    options = {"keyformat": "jsonschema", "schema.registry.url": URL}
    key = {"type": "map", "keyType": "integer", "valueType": "string", "valueContainsNull": True}
    with pytest.raises(SinkSchemaError, match=r"^key: Spark type map<int,string>"):
        _plan(options, {"value": "binary", "key": key})
