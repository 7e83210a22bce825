"""How deep a type or schema may nest: the bounds every format checks before it recurses.

Role: the formats walk Spark types and schemas recursively (deriving, parsing, binding,
encoding). A user's type or schema could nest deeply enough to exhaust Python's recursion limit,
which would surface as a bare ``RecursionError`` from the middle of a walk; these bounds refuse it
first, as a :class:`~kafka_sink.sink_errors.SinkSchemaError` naming the field path where the
bound is passed.

- :data:`MAX_NESTING` (64): a value may lie at most 64 levels below its column. Each struct
  field, array element, map value (Spark), record field, array item, map value (Avro),
  ``properties`` / ``additionalProperties`` entry, array ``items`` (JSON Schema) or message field
  (Protobuf) is one level: ``value.a.b[]`` is three. Avro unions and JSON Schema
  ``oneOf`` / ``anyOf`` / ``$ref`` choose among schemas at the same level and add none (their own
  nesting without a level between them is bounded by the same number). 64 is far above real
  schemas and below Protobuf's default parse recursion limit (100) that readers of the messages
  apply.
- :data:`MAX_DOCUMENT_DEPTH` (512): the JSON text or object of a schema (Avro JSON, a JSON
  Schema) may nest at most 512 arrays and objects, checked without recursion before it is
  decoded or walked (a derived schema at the level bound nests about 4 per level: 260).

Invariants: the checks here never recurse; every walk elsewhere counts its levels against these
bounds before descending, so no schema reaches Python's recursion limit (1,000 frames).
"""

from __future__ import annotations

import re
from typing import Any

from kafka_sink.sink_errors import SinkSchemaError

__all__ = ["MAX_DOCUMENT_DEPTH", "MAX_NESTING", "check_document_depth", "too_deep"]

MAX_NESTING = 64
MAX_DOCUMENT_DEPTH = 512

# A JSON string (escapes included) or one bracket: strings are skipped whole, so a bracket
# inside a name or a doc does not count.
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


def too_deep(path: str, what: str) -> SinkSchemaError:
    """The error for ``what`` (``the Spark type``, ``the Avro schema``...) passing the bound."""
    return SinkSchemaError(
        f"{path}: {what} nests more than {MAX_NESTING} levels deep, the most the formats write. "
        "Fix: flatten the type (for example write the inner part as a JSON string with "
        "to_json), or give a schema that nests less"
    )


def check_document_depth(document: Any, path: str, what: str) -> None:
    """Refuse JSON text (str/bytes) or a decoded JSON value nested deeper than
    :data:`MAX_DOCUMENT_DEPTH` arrays and objects, without recursing."""
    if isinstance(document, bytes | bytearray):
        document = bytes(document).decode("utf-8", "replace")
    depth = 0
    if isinstance(document, str):
        for token in _TOKENS.finditer(document):
            c = token.group()
            if c in "[{":
                depth += 1
                if depth > MAX_DOCUMENT_DEPTH:
                    break
            elif c in "]}":
                depth -= 1
    else:
        stack: list[tuple[Any, int]] = [(document, 1)]
        while stack and depth <= MAX_DOCUMENT_DEPTH:
            node, level = stack.pop()
            if isinstance(node, dict):
                children: Any = node.values()
            elif isinstance(node, list | tuple):
                children = node
            else:
                continue
            depth = max(depth, level)
            stack.extend((child, level + 1) for child in children)
    if depth > MAX_DOCUMENT_DEPTH:
        raise SinkSchemaError(
            f"{path}: {what} nests more than {MAX_DOCUMENT_DEPTH} JSON arrays and objects, "
            "far deeper than any schema the formats write. Fix: give a schema that nests less"
        )
