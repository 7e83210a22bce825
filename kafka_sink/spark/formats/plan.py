"""The driver's resolution of a write's formats: schemas, subjects and schema ids, before any task.

Role: from the parsed :class:`~kafka_sink.spark.formats.options.FormatOptions` and the Spark
types of the ``value`` / ``key`` columns (their ``jsonValue()`` form), build the picklable
:class:`FormatPlan` the tasks follow. Per column:

1. the schema (Avro, or Protobuf with ``valueFormat=protobuf``, registered as schemaType
   ``PROTOBUF``): ``<side>.schema`` parsed, or derived from the Spark type (Avro as
   ``to_avro`` derives it; ``recordName`` / ``recordNamespace``), or, with
   ``use.latest.version``, the subject's latest registered schema;
2. ``bind`` / ``bind_protobuf``: the Spark type must be writable with it; a mismatch names the
   field path;
3. with a registry: the subject under the column's strategy, then the id: the latest version's,
   or the schema checked against the subject's compatibility level and registered
   (``auto.register.schemas``), or looked up (and refused, naming the subject, when it is not
   registered). Without a registry the id is None: plain Avro binary, no header.

Invariants:
- Only the driver calls the registry, and only here; the plan carries schema JSON and ids,
  never a registry connection or credential.
- A subject and schema registered (or found) once are not asked again in this driver process
  (a streaming query plans every micro-batch); a changed schema is a new key and is checked
  and registered again. ``use.latest.version`` asks every time, so a new version is picked up.
- An incompatible schema fails before any task runs, naming the subject, the registry's reason
  and the fix (:class:`~kafka_sink.spark.formats.registry.IncompatibleSchemaError`); a registry
  that does not answer fails in the client's bounded time, naming the URLs.
- With a ``topic`` column, a subject that depends on the topic (the ``topic`` and
  ``topic_record`` strategies) is refused for now: one subject per topic is not resolved yet.
- No pyspark import (the Spark types come as JSON) and no numpy: the encoders are the tasks'.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka_sink.spark.errors import SinkOptionError, SinkSchemaError
from kafka_sink.spark.formats.avro_schema import (
    AvroRecord,
    AvroSchema,
    bind,
    derive_avro_schema,
    parse_avro_schema,
)
from kafka_sink.spark.formats.options import FormatOptions, SideFormat
from kafka_sink.spark.formats.protobuf_schema import (
    ProtoSchema,
    bind_protobuf,
    derive_protobuf_schema,
)
from kafka_sink.spark.formats.registry import (
    Schema,
    SchemaNotFoundError,
    SchemaRegistryClient,
    SchemaRegistryConfig,
)
from kafka_sink.spark.formats.sql_types import SqlType, sql_type_from_json
from kafka_sink.spark.formats.subjects import Side, strategy_option, subject_name

__all__ = ["ColumnFormat", "FormatPlan", "resolve_formats"]

ClientFactory = Callable[[SchemaRegistryConfig], SchemaRegistryClient]

# (registry URLs, subject, schema text) -> schema id, for this driver process.
_REGISTERED: dict[tuple[tuple[str, ...], str, str], int] = {}


@dataclass(frozen=True)
class ColumnFormat:
    """How a task serializes one column: the schema and, with a registry, its id and subject."""

    side: Side
    schema: AvroSchema | ProtoSchema
    schema_id: int | None = None
    subject: str | None = None


@dataclass(frozen=True)
class FormatPlan:
    """The write's serialized columns (picklable; built on the driver, followed by tasks)."""

    value: ColumnFormat | None = None
    key: ColumnFormat | None = None

    @property
    def columns(self) -> tuple[ColumnFormat, ...]:
        return tuple(c for c in (self.value, self.key) if c is not None)


def resolve_formats(
    formats: FormatOptions,
    column_types: Mapping[str, Any],
    topic: str | None,
    *,
    client_factory: ClientFactory = SchemaRegistryClient,
) -> FormatPlan | None:
    """The plan for ``column_types`` (column name -> Spark ``jsonValue()``); None: no format.

    ``topic`` is the ``topic`` option (None: the rows' ``topic`` column names it).
    """
    if not formats.sides:
        return None
    client = client_factory(formats.registry) if formats.registry is not None else None
    resolved: dict[str, ColumnFormat] = {}
    for side in formats.sides:
        if side.side not in column_types:
            raise SinkSchemaError(
                f"option '{side.side}Format' is set but the DataFrame has no '{side.side}' "
                f"column. Fix: add a column named '{side.side}', or remove the option"
            )
        resolved[side.side] = _resolve(formats, side, column_types[side.side], topic, client)
    return FormatPlan(value=resolved.get("value"), key=resolved.get("key"))


def _resolve(
    formats: FormatOptions,
    side: SideFormat,
    spark_type: Any,
    topic: str | None,
    client: SchemaRegistryClient | None,
) -> ColumnFormat:
    sql_type = sql_type_from_json(spark_type)
    path = side.side
    if side.format == "protobuf":
        return _resolve_protobuf(formats, side, sql_type, topic, client)
    if formats.use_latest_version:
        assert client is not None  # FormatOptions refuses use.latest.version without a URL
        subject = _subject(side, topic, record_name=None)
        schema, schema_id = _latest(client, subject)
        bind(sql_type, schema, path)
        return ColumnFormat(side.side, schema, schema_id, subject)
    if side.schema is not None:
        schema = parse_avro_schema(side.schema)
    else:
        schema = derive_avro_schema(
            sql_type, formats.record_name, formats.record_namespace, path=path
        )
    bind(sql_type, schema, path)
    if client is None:
        return ColumnFormat(side.side, schema)
    root = schema.root
    subject = _subject(side, topic, root.name if isinstance(root, AvroRecord) else None)
    wanted = Schema(schema.text)
    return ColumnFormat(side.side, schema, _schema_id(formats, client, subject, wanted), subject)


def _resolve_protobuf(
    formats: FormatOptions,
    side: SideFormat,
    sql_type: SqlType,
    topic: str | None,
    client: SchemaRegistryClient | None,
) -> ColumnFormat:
    # Imported here: protoc (grpcio-tools) is needed only to read a .proto text.
    from kafka_sink.spark.formats.protobuf_descriptor import parse_protobuf_schema

    path = side.side
    if formats.use_latest_version:
        assert client is not None  # FormatOptions refuses use.latest.version without a URL
        subject = _subject(side, topic, record_name=None)
        text, schema_id = _latest_text(client, subject, "PROTOBUF")
        schema = parse_protobuf_schema(text, path)
        bind_protobuf(sql_type, schema, path)
        return ColumnFormat(side.side, schema, schema_id, subject)
    if side.schema is not None:
        schema = parse_protobuf_schema(side.schema, path)
    else:
        schema = derive_protobuf_schema(
            sql_type, formats.record_name, formats.record_namespace, path=path
        )
    bind_protobuf(sql_type, schema, path)
    if client is None:
        return ColumnFormat(side.side, schema)
    subject = _subject(side, topic, schema.full_name)
    wanted = Schema(schema.text, "PROTOBUF")
    return ColumnFormat(side.side, schema, _schema_id(formats, client, subject, wanted), subject)


def _subject(side: SideFormat, topic: str | None, record_name: str | None) -> str:
    if topic is None:
        if side.strategy != "record":
            raise SinkOptionError(
                f"{strategy_option(side.side)}={side.strategy} names the subject after the "
                "topic, but the topics come from the 'topic' column: one subject per topic is "
                "not supported yet. Fix: set the 'topic' option, or use "
                f"{strategy_option(side.side)}=record"
            )
        if record_name is None:
            raise SinkOptionError(
                f"{strategy_option(side.side)}=record with use.latest.version needs a subject "
                "that does not depend on the schema. Fix: set the 'topic' option and use the "
                "topic strategy, or give the schema and remove use.latest.version"
            )
        topic = ""
    return subject_name(side.strategy, topic, side.side, record_name)


def _latest(client: SchemaRegistryClient, subject: str) -> tuple[AvroSchema, int]:
    text, schema_id = _latest_text(client, subject, "AVRO")
    return parse_avro_schema(text), schema_id


def _latest_text(client: SchemaRegistryClient, subject: str, kind: str) -> tuple[str, int]:
    """The text and id of the subject's latest version, which must be a ``kind`` schema."""
    try:
        latest = client.latest_version(subject)
    except SchemaNotFoundError:
        raise SinkSchemaError(
            f"use.latest.version=true but subject {subject!r} has no version in the Schema "
            f"Registry {', '.join(client.config.urls)}. Fix: register a schema under it, or "
            "remove use.latest.version (the schema is then derived and registered)"
        ) from None
    if latest.schema.schema_type != kind:
        raise SinkSchemaError(
            f"the latest version of subject {subject!r} is a {latest.schema.schema_type} "
            f"schema, not {kind}. Fix: use the format of the subject, or another subject"
        )
    return latest.schema.schema_str, latest.schema_id


def _schema_id(
    formats: FormatOptions, client: SchemaRegistryClient, subject: str, wanted: Schema
) -> int:
    key = (client.config.urls, subject, wanted.schema_str)
    known = _REGISTERED.get(key)
    if known is not None:
        return known
    if formats.auto_register:
        if not client.check_compatibility(subject, wanted).is_compatible:
            # Some registries (Apicurio) answer the check without its reasons and give them
            # with the refusal of the registration (409), which names them; failing that, the
            # check's own verdict is raised.
            client.register(subject, wanted)
            client.ensure_compatible(subject, wanted)
        schema_id = client.register(subject, wanted)
    else:
        found = client.lookup(subject, wanted)
        if found is None:
            raise SinkSchemaError(
                f"the {subject!r} schema is not registered in the Schema Registry "
                f"{', '.join(client.config.urls)} and auto.register.schemas=false. Fix: "
                "register it, or set auto.register.schemas=true, or use.latest.version=true"
            )
        schema_id = found.schema_id
    _REGISTERED[key] = schema_id
    return schema_id
