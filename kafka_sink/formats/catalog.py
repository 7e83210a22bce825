"""The registry formats the sink knows: one line per format.

Role: ``FORMATS`` lists every :class:`~kafka_sink.formats.format.Format` (in the order error
messages name them); ``named`` finds one by its ``valueFormat`` / ``keyFormat`` value (None
when there is none), ``get`` one the options have accepted, and ``names`` lists the values.
Adding a format is a module giving its ``Format`` and one entry here; the options, the plan and
the batch encoder read this list when called, never a copy of it.

Invariants: names are unique and lower case; importing this module loads the formats' driver
sides only (no numpy, no encoder).
"""

from __future__ import annotations

from kafka_sink.formats.avro_format import AVRO
from kafka_sink.formats.format import Format
from kafka_sink.formats.json_format import JSON
from kafka_sink.formats.protobuf_format import PROTOBUF

__all__ = ["FORMATS", "get", "named", "names"]

FORMATS: tuple[Format, ...] = (AVRO, PROTOBUF, JSON)


def names() -> tuple[str, ...]:
    """The ``valueFormat`` / ``keyFormat`` values, in ``FORMATS`` order."""
    return tuple(f.name for f in FORMATS)


def named(name: str) -> Format | None:
    """The format called ``name`` (lower case); None when there is none."""
    for candidate in FORMATS:
        if candidate.name == name:
            return candidate
    return None


def get(name: str) -> Format:
    """The format called ``name``, which the options have accepted (KeyError otherwise)."""
    found = named(name)
    if found is None:
        raise KeyError(f"no registry format {name!r}; formats: {', '.join(names())}")
    return found
