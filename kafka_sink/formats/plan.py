"""The driver's resolution of a write's formats: schemas, subjects and schema ids, before any task.

Role: from the parsed :class:`~kafka_sink.formats.options.FormatOptions` and the Spark
types of the ``value`` / ``key`` columns (their ``jsonValue()`` form), build the picklable
:class:`FormatPlan` the tasks follow. Per column:

1. the schema of the column's format (its :class:`~kafka_sink.formats.format.Format` in
   ``catalog.FORMATS``: Avro, Protobuf or JSON Schema, registered as schemaType ``AVRO``,
   ``PROTOBUF``, ``JSON``): ``<side>.schema`` parsed, or derived from the Spark type (Avro as
   ``to_avro`` derives it, with ``recordName`` / ``recordNamespace``; Protobuf's message named
   likewise; JSON Schema titled ``recordName``), or, with ``use.latest.version``, the
   subject's latest registered schema (of the same type);
2. the format's ``bind``: the Spark type must be writable with it; a mismatch names the field
   path;
3. with a registry: the subject under the column's strategy, then the id: the latest version's,
   or the schema checked against the subject's compatibility level and registered
   (``auto.register.schemas``), or looked up (and refused, naming the subject, when it is not
   registered), with the registry's ``schemaType`` (``AVRO``, ``JSON``). Without a registry the
   id is None: plain Avro binary or plain JSON, no header.

With a ``topic`` column (no ``topic`` option) the topics are only known to the tasks, which
never call the registry; so the ``topics`` option lists the topics the column may hold and each
is resolved here, in order, as if it were the ``topic`` option: the column's ``by_topic`` holds
one :class:`ColumnFormat` per listed topic (its subject under the strategy, its id), and a row
whose topic is not listed fails its task naming the topic and the option (``batch_encoder``).

Invariants:
- Only the driver calls the registry, and only here; the plan carries schema JSON and ids,
  never a registry connection or credential.
- A subject and schema registered (or found) once are not asked again in this driver process
  (a streaming query plans every micro-batch); a changed schema is a new key and is checked
  and registered again. ``use.latest.version`` asks every time, so a new version is picked up.
- An incompatible schema fails before any task runs, naming the subject, the registry's reason
  and the fix (:class:`~kafka_sink.formats.registry.IncompatibleSchemaError`); a registry
  that does not answer fails in the client's bounded time, naming the URLs.
- With a ``topic`` column and no ``topics`` option, a subject that depends on the topic (the
  ``topic`` and ``topic_record`` strategies) is refused, naming ``topics``; ``topics`` with the
  ``topic`` option is refused too (the option overrides the column: one topic).
- No pyspark import (the Spark types come as JSON) and no numpy: the encoders are the tasks'.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka_sink.formats import catalog
from kafka_sink.formats.format import FormatSchema
from kafka_sink.formats.options import FormatOptions, SideFormat
from kafka_sink.formats.registry import (
    Schema,
    SchemaRegistryClient,
    SchemaRegistryConfig,
)
from kafka_sink.formats.sql_types import sql_type_from_json
from kafka_sink.formats.subjects import Side, strategy_option, subject_name
from kafka_sink.sink_errors import SchemaNotFoundError, SinkOptionError, SinkSchemaError

__all__ = ["ColumnFormat", "FormatPlan", "resolve_formats"]

ClientFactory = Callable[[SchemaRegistryConfig], SchemaRegistryClient]

# (registry URLs, subject, schema text) -> schema id, for this driver process.
_REGISTERED: dict[tuple[tuple[str, ...], str, str], int] = {}


@dataclass(frozen=True)
class ColumnFormat:
    """How a task serializes one column: the schema and, with a registry, its id and subject."""

    side: Side
    schema: FormatSchema
    schema_id: int | None = None
    subject: str | None = None
    #: The format's name in ``catalog.FORMATS`` (``valueFormat`` / ``keyFormat``).
    format: str = "avro"
    #: With the ``topics`` option: (topic, that topic's format) per listed topic, in order.
    by_topic: tuple[tuple[str, ColumnFormat], ...] = ()


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
    if topic is not None and formats.topics is not None:
        raise SinkOptionError(
            "option 'topics' lists the topics of a 'topic' column, but the 'topic' option is "
            "set, which overrides the column: every record goes to "
            f"{topic!r}. Fix: remove one of them"
        )
    client = client_factory(formats.registry) if formats.registry is not None else None
    resolved: dict[str, ColumnFormat] = {}
    for side in formats.sides:
        if side.side not in column_types:
            raise SinkSchemaError(
                f"option '{side.side}Format' is set but the DataFrame has no '{side.side}' "
                f"column. Fix: add a column named '{side.side}', or remove the option"
            )
        spark_type = column_types[side.side]
        if formats.topics is None:
            resolved[side.side] = _resolve(formats, side, spark_type, topic, client)
        else:
            resolved[side.side] = _per_topic(formats, side, spark_type, formats.topics, client)
    return FormatPlan(value=resolved.get("value"), key=resolved.get("key"))


def _per_topic(
    formats: FormatOptions,
    side: SideFormat,
    spark_type: Any,
    topics: tuple[str, ...],
    client: SchemaRegistryClient | None,
) -> ColumnFormat:
    """One resolution per listed topic; the first topic's schema stands for the column."""
    by_topic = tuple((t, _resolve(formats, side, spark_type, t, client)) for t in topics)
    first = by_topic[0][1]
    return ColumnFormat(side.side, first.schema, format=side.format, by_topic=by_topic)


def _resolve(
    formats: FormatOptions,
    side: SideFormat,
    spark_type: Any,
    topic: str | None,
    client: SchemaRegistryClient | None,
) -> ColumnFormat:
    sql_type = sql_type_from_json(spark_type, side.side)
    path = side.side
    described = catalog.get(side.format)
    schema: FormatSchema
    if formats.use_latest_version:
        assert client is not None  # FormatOptions refuses use.latest.version without a URL
        subject = _subject(side, topic, record_name=None)
        schema, schema_id = _latest(client, subject, side.format, path)
        described.bind(sql_type, schema, path)
        return ColumnFormat(side.side, schema, schema_id, subject, side.format)
    if side.schema is not None:
        schema = described.parse(side.schema, path)
    else:
        schema = described.derive(sql_type, formats.record_name, formats.record_namespace, path)
    described.bind(sql_type, schema, path)
    if client is None:
        return ColumnFormat(side.side, schema, format=side.format)
    subject = _subject(side, topic, described.record_name(schema))
    wanted = Schema(schema.text, described.schema_type)
    schema_id = _schema_id(formats, client, subject, wanted)
    return ColumnFormat(side.side, schema, schema_id, subject, side.format)


def _subject(side: SideFormat, topic: str | None, record_name: str | None) -> str:
    if topic is None:
        if side.strategy != "record":
            raise SinkOptionError(
                f"{strategy_option(side.side)}={side.strategy} names the subject after the "
                "topic, but the topics come from the 'topic' column and are not known before "
                "the tasks run. Fix: list the topics the column may hold with "
                ".option('topics', 'a,b') (one subject per topic, resolved on the driver), set "
                f"the 'topic' option, or use {strategy_option(side.side)}=record"
            )
        if record_name is None:
            raise SinkOptionError(
                f"{strategy_option(side.side)}=record with use.latest.version needs a subject "
                "that does not depend on the schema. Fix: set the 'topic' option and use the "
                "topic strategy, or give the schema and remove use.latest.version"
            )
        topic = ""
    return subject_name(side.strategy, topic, side.side, record_name)


def _latest(
    client: SchemaRegistryClient, subject: str, fmt: str, path: str
) -> tuple[FormatSchema, int]:
    try:
        latest = client.latest_version(subject)
    except SchemaNotFoundError:
        raise SinkSchemaError(
            f"use.latest.version=true but subject {subject!r} has no version in the Schema "
            f"Registry {', '.join(client.config.urls)}. Fix: register a schema under it, or "
            "remove use.latest.version (the schema is then derived and registered)"
        ) from None
    described = catalog.get(fmt)
    if latest.schema.schema_type != described.schema_type:
        raise SinkSchemaError(
            f"the latest version of subject {subject!r} is a {latest.schema.schema_type} "
            f"schema, not {described.schema_type}. Fix: use the format of the subject, or another "
            "subject"
        )
    return described.parse(latest.schema.schema_str, path), latest.schema_id


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
