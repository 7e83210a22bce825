"""What one registry format is: the :class:`Format` description every format module gives.

Role: the single place where the sink learns a format. A ``Format`` names it (the
``valueFormat`` / ``keyFormat`` value and the registry's ``schemaType``), says how an explicit
schema is parsed and a schema derived from a Spark type, how a Spark type is bound to a schema,
and where its columnar encoder and its single-record serializer live. The options
(``options``), the driver's resolution (``plan``) and a task's encoding (``batch_encoder``) ask
the catalog (``catalog.FORMATS``) for the format by name and follow its description, so none of
them lists formats.

The driver side stays light: the parsing, deriving and binding functions are the driver's own
(no numpy), while the columnar encoder and the serializer are named by :class:`Lazy`
references (``"module:attribute"``), imported the first time a task or a user asks for them.
A driver that parses options and plans a write therefore never loads an encoder.

Invariants: a ``Format`` is immutable and not pickled (a plan carries the format's name and
schema; a task looks the description up again); a lazy reference names a module of this
package and an attribute in it, and resolving it twice gives the same object.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kafka_sink.formats.registry import SchemaType
from kafka_sink.formats.sql_types import SqlType

__all__ = ["Format", "FormatSchema", "Lazy"]


class FormatSchema(Protocol):
    """A format's parsed schema: what a plan carries and a registry stores (``text``)."""

    @property
    def text(self) -> str: ...


@dataclass(frozen=True)
class Lazy:
    """An attribute of a module named as ``"module:attribute"``, imported when resolved."""

    target: str

    def resolve(self) -> Any:
        module, _, attribute = self.target.partition(":")
        return getattr(importlib.import_module(module), attribute)


def _no_indexes(schema: Any) -> tuple[int, ...] | None:
    return None


@dataclass(frozen=True)
class Format:
    """One format's parts: names, the driver's schema functions, the executor's encoders."""

    #: The ``valueFormat`` / ``keyFormat`` value (lower case).
    name: str
    #: The registry's ``schemaType`` of its schemas.
    schema_type: SchemaType
    #: What ``<side>.schema`` holds, as error messages name it (``Avro JSON``).
    schema_kind: str
    #: ``parse(text, path)``: an explicit or registered schema.
    parse: Callable[[str, str], FormatSchema]
    #: ``derive(sql_type, record_name, record_namespace, path)``: the schema of a Spark type.
    derive: Callable[[SqlType, str, str, str], FormatSchema]
    #: ``bind(sql_type, schema, path)``: refuses a Spark type the schema cannot take (naming the
    #: field path); the result is the plan the columnar encoder follows.
    bind: Callable[[SqlType, Any, str], object]
    #: The schema's record name for the ``record`` subject strategies (None: it has none).
    record_name: Callable[[Any], str | None]
    #: The :class:`~kafka_sink.formats.base.ColumnEncoder` subclass, built as ``(schema, path)``.
    column_encoder: Lazy
    #: The :class:`~kafka_sink.formats.base.FramedSerializer` subclass, the producer's
    #: per-record ``key.serializer`` / ``value.serializer``, built as ``(schema, schema_id)``.
    serializer: Lazy
    #: The message-index list framed after the schema id (Protobuf's); None for most formats.
    message_indexes: Callable[[Any], tuple[int, ...] | None] = _no_indexes
    #: Whether ``recordNamespace`` means something to it (an Avro namespace, a Protobuf package).
    takes_namespace: bool = False
    #: Without a registry, what its payloads are called when the schema is given
    #: (``plain JSON``); None when a derived schema may be written without a registry too (Avro,
    #: which Spark's ``to_avro`` writes plain), so only formats with a value here need one.
    plain_needs_schema: str | None = None

    def new_column_encoder(self, schema: Any, path: str) -> Any:
        """The columnar encoder of ``schema`` for column ``path`` (imports the encoder)."""
        return self.column_encoder.resolve()(schema, path)

    def new_serializer(self, schema: Any, schema_id: int | None = None) -> Any:
        """The producer's serializer of ``schema`` (imports the serializer)."""
        return self.serializer.resolve()(schema, schema_id)
