"""The format catalog: every ``Format`` has every part, and a format is known by its entry alone.

Each registered format is driven through its description only (derive, bind, parse, the
columnar encoder, the serializer, the frame's indexes) and must give the bytes its serializer
gives. A fake format added to ``catalog.FORMATS`` is then accepted by the options, resolved by
the plan and encoded by the batch encoder, none of which is told about it otherwise; and the
driver's side, imported in a fresh interpreter, loads no encoder.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from kafka_sink.formats import catalog
from kafka_sink.formats.base import ColumnEncoder, FramedSerializer
from kafka_sink.formats.batch_encoder import BatchEncoder
from kafka_sink.formats.format import Format, Lazy
from kafka_sink.formats.options import FormatOptions
from kafka_sink.formats.plan import resolve_formats
from kafka_sink.formats.registry import SCHEMA_TYPES, SchemaRegistryConfig
from kafka_sink.formats.sql_types import AtomicType, SqlType, sql_type_from_json
from kafka_sink.formats.wire_format import header
from kafka_sink.sink_errors import SinkOptionError, SinkSchemaError

ORDER_JSON = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "integer", "nullable": False, "metadata": {}},
        {"name": "name", "type": "string", "nullable": True, "metadata": {}},
    ],
}
ORDERS = pa.array(
    [{"id": 1, "name": "tea"}, None, {"id": 3, "name": None}],
    pa.struct([pa.field("id", pa.int32(), nullable=False), pa.field("name", pa.string())]),
)


def test_the_catalog_holds_the_three_formats_in_the_order_messages_name_them() -> None:
    assert catalog.names() == ("avro", "protobuf", "jsonschema")
    assert [f.schema_type for f in catalog.FORMATS] == ["AVRO", "PROTOBUF", "JSON"]
    assert catalog.named("nope") is None
    with pytest.raises(KeyError, match="avro, protobuf, jsonschema"):
        catalog.get("nope")


@pytest.mark.parametrize("described", catalog.FORMATS, ids=catalog.names())
def test_every_format_has_every_part(described: Format) -> None:
    assert described.name == described.name.lower() and catalog.get(described.name) is described
    assert described.schema_type in SCHEMA_TYPES and described.schema_kind
    assert issubclass(described.column_encoder.resolve(), ColumnEncoder)
    assert issubclass(described.serializer.resolve(), FramedSerializer)

    sql_type = sql_type_from_json(ORDER_JSON)
    schema = described.derive(sql_type, "Order", "", "value")
    described.bind(sql_type, schema, "value")
    assert described.record_name(schema) == "Order"
    assert described.parse(schema.text, "value").text == schema.text

    payloads = described.new_column_encoder(schema, "value").encode(ORDERS)
    serializer = described.new_serializer(schema, 7)
    framed = serializer.serialize_column(ORDERS).to_pylist()
    prefix = header(7, described.message_indexes(schema))
    assert framed == [None if p is None else prefix + p for p in payloads.to_pylist()]
    # The per-record path gives the bytes of the columnar one.
    for row, expected in zip(ORDERS.to_pylist(), framed, strict=True):
        assert serializer.serialize(row) == expected


def test_a_format_that_does_not_take_a_namespace_is_refused_one() -> None:
    takers = [f.name for f in catalog.FORMATS if f.takes_namespace]
    assert takers == ["avro", "protobuf"]
    with pytest.raises(SinkOptionError, match="no column is written as avro or protobuf"):
        FormatOptions.from_options(
            {"valueformat": "jsonschema", "value.schema": "{}", "recordnamespace": "shop"}
        )


# -- a format known by its catalog entry alone ---------------------------------------------


@dataclass(frozen=True)
class ShoutSchema:
    """The fake format's schema: a word every payload starts with."""

    text: str


class ShoutEncoder(ColumnEncoder[ShoutSchema, SqlType]):
    """A string column as ``<word>:<VALUE>`` payloads."""

    def _bind(self, sql_type: SqlType) -> SqlType:
        return _bind_shout(sql_type, self.schema, self.path)

    def _encode_bound(self, array: Any, binding: SqlType) -> Any:
        shouted = pc.binary_join_element_wise(self.schema.text, pc.utf8_upper(array), ":")
        return shouted.cast(pa.large_binary())


class ShoutSerializer(FramedSerializer[ShoutSchema]):
    def _parse(self, schema: Any) -> ShoutSchema:
        return schema if isinstance(schema, ShoutSchema) else ShoutSchema(str(schema))

    def _column_encoder(self, schema: ShoutSchema) -> ShoutEncoder:
        return ShoutEncoder(schema)

    def _payload(self, value: Any) -> bytes:
        return f"{self.schema.text}:{str(value).upper()}".encode()


def _bind_shout(sql_type: SqlType, schema: Any, path: str) -> SqlType:
    if sql_type != AtomicType("string"):
        raise SinkSchemaError(f"{path}: shout writes strings only")
    return sql_type


SHOUT = Format(
    name="shout",
    schema_type="JSON",
    schema_kind="a word",
    parse=lambda text, path: ShoutSchema(text),
    derive=lambda sql_type, record_name, namespace, path: ShoutSchema(record_name),
    bind=_bind_shout,
    record_name=lambda schema: schema.text,
    column_encoder=Lazy(f"{__name__}:ShoutEncoder"),
    serializer=Lazy(f"{__name__}:ShoutSerializer"),
    plain_needs_schema="plain shouting",
)


@pytest.fixture
def with_shout(monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka_sink.formats import plan

    monkeypatch.setattr(catalog, "FORMATS", (*catalog.FORMATS, SHOUT))
    monkeypatch.setattr(plan, "_REGISTERED", {})


def test_a_format_unknown_to_the_catalog_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(SinkOptionError, match="supported: avro, protobuf, jsonschema "):
        FormatOptions.from_options({"valueformat": "shout", "value.schema": "hey"})


def test_a_format_added_to_the_catalog_is_accepted_planned_and_encoded(with_shout: None) -> None:
    with pytest.raises(SinkOptionError, match="supported: avro, protobuf, jsonschema, shout "):
        FormatOptions.from_options({"valueformat": "whisper"})
    # Its own description decides what the options refuse, and how they say it.
    with pytest.raises(SinkOptionError, match=r"\(a word; then plain shouting is written"):
        FormatOptions.from_options({"valueformat": "shout"})
    with pytest.raises(SinkOptionError, match=r"give a schema \(a word\)"):
        FormatOptions.from_options({"valueformat": "shout", "value.schema": " "})

    options = FormatOptions.from_options({"valueFormat": "SHOUT", "value.schema": "hey"})
    plan = resolve_formats(options, {"value": "string"}, "t")
    assert plan is not None and plan.value is not None
    assert (plan.value.format, plan.value.schema, plan.value.schema_id) == (
        "shout",
        ShoutSchema("hey"),
        None,
    )
    with pytest.raises(SinkSchemaError, match="shout writes strings only"):
        resolve_formats(options, {"value": "integer"}, "t")

    batch = pa.record_batch({"value": pa.array(["a", None, "bc"])})
    encoded = BatchEncoder(plan).encode(batch).column("value").to_pylist()
    assert encoded == [b"hey:A", None, b"hey:BC"]


def test_a_format_added_to_the_catalog_is_registered_with_its_schema_type(
    with_shout: None,
) -> None:
    registered: list[tuple[str, str, str]] = []

    class Client:
        def __init__(self, config: SchemaRegistryConfig) -> None:
            self.config = config

        def check_compatibility(self, subject: str, schema: Any) -> Any:
            return type("Verdict", (), {"is_compatible": True})()

        def register(self, subject: str, schema: Any) -> int:
            registered.append((subject, schema.schema_str, schema.schema_type))
            return 42

    options = FormatOptions.from_options(
        {
            "valueformat": "shout",
            "schema.registry.url": "http://registry.test:8081",
            "recordname": "derived",
        }
    )
    plan = resolve_formats(options, {"value": "string"}, "orders", client_factory=Client)
    assert plan is not None and plan.value is not None
    assert (plan.value.schema, plan.value.schema_id) == (ShoutSchema("derived"), 42)
    assert registered == [("orders-value", "derived", "JSON")]
    batch = pa.record_batch({"value": pa.array(["x"])})
    [payload] = BatchEncoder(plan).encode(batch).column("value").to_pylist()
    assert payload == header(42, None) + b"derived:X"


def test_the_driver_side_loads_no_encoder_nor_serializer() -> None:
    probe = (
        "import json, sys\n"
        "import kafka_sink.formats.catalog, kafka_sink.formats.options, kafka_sink.formats.plan\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    loaded = set(json.loads(subprocess.check_output([sys.executable, "-c", probe])))
    heavy = {
        "numpy",
        "kafka_sink.formats.columnar",
        "kafka_sink.formats.batch_encoder",
        *(f.column_encoder.target.partition(":")[0] for f in catalog.FORMATS),
        *(f.serializer.target.partition(":")[0] for f in catalog.FORMATS),
    }
    assert "kafka_sink.formats.avro_columnar" in heavy
    assert loaded & heavy == set()


def test_the_options_spell_the_registry_prefix_as_the_registry_client_does() -> None:
    # formats/options.py spells it so that a write with no format never imports the client.
    from kafka_sink.formats import options, registry

    assert options.REGISTRY_PREFIX == registry.PREFIX
