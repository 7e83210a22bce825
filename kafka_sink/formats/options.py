"""The registry-format options of ``format("pykafka")``: ``valueFormat``, ``keyFormat`` and theirs.

Role: parse, on the driver, the options that say how the sink serializes the ``value`` and
``key`` columns, into a :class:`FormatOptions` that the driver's resolution
(:mod:`kafka_sink.formats.plan`) follows. The rest of the sink's options are
``spark/options.py``'s, which leaves these keys to this module.

Keys (Spark lower-cases them; names as documented in README.md and docs/formats.md):

- ``valueFormat`` / ``keyFormat``: a format of ``catalog.FORMATS`` (``avro``, ``protobuf``,
  ``jsonschema``); unset, the column is written as bytes (a string or binary column, as Spark's
  Kafka sink does).
- ``value.schema`` / ``key.schema``: an explicit schema (Avro JSON, ``.proto`` text, or a JSON
  Schema); unset, the schema is derived from the column's Spark type (Avro as Spark's
  ``to_avro`` derives it, Protobuf as ``protobuf_schema`` and JSON Schema as ``json_schema``
  document).
- ``recordName`` / ``recordNamespace``: the derived top-level record's name and namespace
  (Spark's ``to_avro`` options; defaults ``topLevelRecord`` and none); a derived JSON Schema's
  ``title`` is ``recordName`` (JSON Schema has no namespace: ``recordNamespace`` with no
  column of a format that takes one, Avro or Protobuf, is refused).
- ``topics``: with a ``topic`` column, the comma-separated topics the column may hold, so that
  the driver resolves one subject per topic before any task runs (``plan.py``).
- ``value.subject.name.strategy`` / ``key.subject.name.strategy``: ``topic`` (default),
  ``record``, ``topic_record`` (``subjects.py``).
- ``auto.register.schemas`` (default true): register the schema on first use;
  ``use.latest.version`` (default false): write with the subject's latest registered schema.
- ``schema.registry.*``: the registry connection (``registry.py``'s
  :class:`SchemaRegistryConfig`); without ``schema.registry.url`` Avro is written as plain Avro
  binary, with no wire-format header; ``protobuf`` and ``jsonschema`` (the formats whose
  ``Format.plain_needs_schema`` is set) are then refused unless ``<side>.schema`` is given
  (then plain Protobuf or JSON payloads).

Invariants: every key here is applied or refused with a
:class:`~kafka_sink.sink_errors.SinkOptionError` naming it and the fix: a side's options
without its format, registry options without any format, ``use.latest.version`` with an
explicit schema or with ``auto.register.schemas=true``. The registry's settings are kept as
their :class:`SchemaRegistryConfig`, whose ``repr`` shows no secret; no pyspark import.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafka_sink.errors import ConfigError
from kafka_sink.formats.avro_schema import DEFAULT_RECORD_NAME
from kafka_sink.formats.subjects import (
    Side,
    SubjectNameStrategy,
    parse_strategy,
    strategy_option,
)
from kafka_sink.sink_errors import SinkError, SinkOptionError

if TYPE_CHECKING:
    from kafka_sink.formats.registry import SchemaRegistryConfig

__all__ = [
    "FORMAT_OPTION_NAMES",
    "REGISTRY_PREFIX",
    "FormatOptions",
    "SideFormat",
    "is_format_key",
]

SIDES: tuple[Side, ...] = ("value", "key")

#: The registry connection's options (``registry.PREFIX``, spelled here so that a write with no
#: format never imports the catalog, the registry client and the network stack under it: every
#: Python process of every write parses these options).
REGISTRY_PREFIX = "schema.registry."

#: This module's options, spelled as documented (``schema.registry.*`` aside).
FORMAT_OPTION_NAMES = (
    "valueFormat",
    "keyFormat",
    "value.schema",
    "key.schema",
    "value.subject.name.strategy",
    "key.subject.name.strategy",
    "auto.register.schemas",
    "use.latest.version",
    "recordName",
    "recordNamespace",
    "topics",
)
_KEYS = frozenset(name.lower() for name in FORMAT_OPTION_NAMES)


def is_format_key(key: str) -> bool:
    """Whether the lower-cased option ``key`` is this module's to parse."""
    return key in _KEYS or key.startswith(REGISTRY_PREFIX)


def _format_option(side: Side) -> str:
    return f"{side}Format"


@dataclass(frozen=True)
class SideFormat:
    """How one column (``value`` or ``key``) is serialized."""

    side: Side
    format: str
    #: ``<side>.schema`` as given (Avro JSON or JSON Schema text); None: derived.
    schema: str | None
    strategy: SubjectNameStrategy


@dataclass(frozen=True)
class FormatOptions:
    """The parsed options; ``value`` / ``key`` None when that column is written as bytes."""

    value: SideFormat | None = None
    key: SideFormat | None = None
    registry: SchemaRegistryConfig | None = None
    auto_register: bool = True
    use_latest_version: bool = False
    record_name: str = DEFAULT_RECORD_NAME
    record_namespace: str = ""
    #: The ``topics`` option: the topics a ``topic`` column may hold; None when not given.
    topics: tuple[str, ...] | None = None

    @property
    def sides(self) -> tuple[SideFormat, ...]:
        return tuple(s for s in (self.value, self.key) if s is not None)

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> FormatOptions:
        """The format settings among ``options`` (other keys are ignored)."""
        given = {k.strip().lower(): str(v) for k, v in options.items()}
        given = {k: v for k, v in given.items() if is_format_key(k)}
        sides = {side: _side(given, side) for side in SIDES}
        if not any(sides.values()):
            if given:
                from kafka_sink.formats import catalog

                raise SinkOptionError(
                    f"option(s) {', '.join(sorted(given))} set but neither 'valueFormat' nor "
                    "'keyFormat' is: without a format the columns are written as bytes. Fix: "
                    f".option('valueFormat', 'avro') (formats: {', '.join(catalog.names())}), "
                    "or remove them"
                )
            return cls()
        auto_register = _flag(given, "auto.register.schemas", default=True)
        use_latest = _flag(given, "use.latest.version", default=False)
        if use_latest:
            if given.get("auto.register.schemas", "").strip().lower() == "true":
                raise SinkOptionError(
                    "options 'use.latest.version=true' and 'auto.register.schemas=true' "
                    "contradict: the latest registered schema is used, nothing is registered. "
                    "Fix: remove one of them"
                )
            explicit = [f"{s.side}.schema" for s in sides.values() if s and s.schema]
            if explicit:
                raise SinkOptionError(
                    f"option 'use.latest.version=true' takes the schema from the registry, but "
                    f"{', '.join(explicit)} is given too. Fix: remove one of them"
                )
            auto_register = False
        # A format is given from here on: its catalog and the registry client are needed.
        from kafka_sink.formats import catalog
        from kafka_sink.formats.registry import SchemaRegistryConfig

        registry = None
        if any(k.startswith(REGISTRY_PREFIX) for k in given):
            with _as_option_error():
                registry = SchemaRegistryConfig.from_options(given)
        if registry is None and use_latest:
            raise SinkOptionError(
                "option 'use.latest.version=true' reads the schema from a Schema Registry, but "
                f"'{REGISTRY_PREFIX}url' is not set. Fix: set it, or remove use.latest.version"
            )
        _refuse_plain_derived(sides.values(), registry)
        namespace = given.get("recordnamespace", "").strip()
        if namespace and not any(
            s and catalog.get(s.format).takes_namespace for s in sides.values()
        ):
            takers = " or ".join(f.name for f in catalog.FORMATS if f.takes_namespace)
            raise SinkOptionError(
                "option 'recordNamespace' names an Avro record's namespace (a Protobuf "
                f"message's package), but no column is written as {takers} (a JSON "
                "Schema's title is 'recordName' alone). Fix: remove it, or put the namespace "
                "into recordName"
            )
        return cls(
            value=sides["value"],
            key=sides["key"],
            registry=registry,
            auto_register=auto_register,
            use_latest_version=use_latest,
            record_name=given.get("recordname", "").strip() or DEFAULT_RECORD_NAME,
            record_namespace=namespace,
            topics=_topics(given.get("topics")),
        )


def _side(given: Mapping[str, str], side: Side) -> SideFormat | None:
    option = _format_option(side)
    raw = given.get(option.lower())
    schema = given.get(f"{side}.schema")
    strategy_raw = given.get(strategy_option(side))
    if raw is None or not raw.strip():
        named = [n for n in (f"{side}.schema", strategy_option(side)) if given.get(n) is not None]
        if raw is not None or named:
            raise SinkOptionError(
                f"option(s) {', '.join(named) or option} need '{option}' to be set: "
                f".option('{option}', 'avro'), or remove them"
            )
        return None
    from kafka_sink.formats import catalog

    name = raw.strip().lower()
    described = catalog.named(name)
    if described is None:
        raise SinkOptionError(
            f"option '{option}': {raw.strip()!r} is not a format; supported: "
            f"{', '.join(catalog.names())} (or leave '{option}' unset to write a string or "
            "binary column as bytes)"
        )
    if schema is not None and not schema.strip():
        raise SinkOptionError(
            f"option '{side}.schema' is empty: give a schema ({described.schema_kind}), or "
            "remove it to derive the schema from the column's Spark type"
        )
    with _as_option_error():
        strategy = parse_strategy(strategy_raw, side)
    return SideFormat(side, name, schema, strategy)


def _refuse_plain_derived(
    sides: Iterable[SideFormat | None], registry: SchemaRegistryConfig | None
) -> None:
    """A derived schema written with no registry leaves readers with none, for the formats
    whose payloads are unreadable without their schema (``Format.plain_needs_schema``: Protobuf,
    JSON; unlike Avro, which Spark's ``to_avro`` writes plain)."""
    from kafka_sink.formats import catalog

    for side in sides:
        if not side or registry is not None or side.schema is not None:
            continue
        described = catalog.get(side.format)
        if described.plain_needs_schema is not None:
            raise SinkOptionError(
                f"option '{side.side}Format={side.format}' needs '{REGISTRY_PREFIX}url' (the "
                f"payloads are framed with the registered schema's id) or '{side.side}.schema' "
                f"({described.schema_kind}; then {described.plain_needs_schema} is written, as "
                "the schema given). Fix: set one of them"
            )


def _topics(raw: str | None) -> tuple[str, ...] | None:
    if raw is None:
        return None
    topics = tuple(dict.fromkeys(t.strip() for t in raw.split(",") if t.strip()))
    if not topics:
        raise SinkOptionError(
            "option 'topics' is empty: list the topics the 'topic' column may hold, "
            "comma-separated (e.g. 'orders,refunds'), or remove it"
        )
    return topics


@contextmanager
def _as_option_error() -> Iterator[None]:
    """The formats' own ConfigErrors as the data source's option errors (same text); the sink's
    own errors (a schema error is a ConfigError too) pass as they are."""
    try:
        yield
    except SinkError:
        raise
    except ConfigError as exc:
        raise SinkOptionError(str(exc)) from None


def _flag(given: Mapping[str, str], key: str, *, default: bool) -> bool:
    raw = given.get(key)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise SinkOptionError(f"option '{key}': expected true or false, got {raw!r}")
    return value == "true"
