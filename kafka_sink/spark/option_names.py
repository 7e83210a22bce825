"""The option names ``format("pykafka")`` accepts, and the closest one to a name it does not.

Role: the sink's own option names (as the README spells them) and Spark's, both read from
``option_table.SINK_OPTIONS``, and the rule that turns an unknown name into a one-line message
with a suggestion (``difflib.get_close_matches``), so a misspelled option is named before any
option it hides is reported missing.

Invariants:
- Spark hands a data source its options with lower-cased keys (``CaseInsensitiveDict``):
  names are matched lower-cased and suggested as documented (``commitLog``, not ``commitlog``).
- A producer key given without the ``kafka.`` prefix (``acks``) suggests the prefixed option
  (``kafka.acks``); a ``kafka.`` key that is not a producer key suggests the closest producer
  key, or the sink option it wraps (``kafka.topic`` -> ``topic``).
- The message is one line and never quotes an option's value (values may be secrets).
"""

from __future__ import annotations

import difflib
from collections.abc import Collection

from kafka_sink.formats.options import FORMAT_OPTION_NAMES
from kafka_sink.spark.option_table import SINK_OPTIONS

__all__ = [
    "KAFKA_PREFIX",
    "SINK_KEYS",
    "SINK_OPTION_NAMES",
    "SPARK_KEYS",
    "SPARK_OPTION_NAMES",
    "closest_option",
    "unknown_option_message",
]

KAFKA_PREFIX = "kafka."

#: The sink's own options, spelled as documented (``option_table.py``'s rows), then the
#: registry formats' (``formats/options.py``; ``schema.registry.*`` is a prefix).
SINK_OPTION_NAMES = (
    *(row.name for row in SINK_OPTIONS if not row.spark),
    *FORMAT_OPTION_NAMES,
)
#: What Spark itself passes to a writer: ``path`` from ``save(path)`` / ``start(path)``,
#: ``checkpointLocation`` and ``queryName`` from ``writeStream``.
SPARK_OPTION_NAMES = tuple(row.name for row in SINK_OPTIONS if row.spark)

SINK_KEYS = frozenset(name.lower() for name in SINK_OPTION_NAMES)
SPARK_KEYS = frozenset(name.lower() for name in SPARK_OPTION_NAMES)

# difflib's ratio: 0.8 catches one or two letters wrong in a name of ten or more
# ('kafka.bootstrap.server', 'comitLog') without offering an unrelated name for a short word.
_CUTOFF = 0.8


def closest_option(key: str, producer_keys: Collection[str]) -> str | None:
    """The valid option ``key`` (lower-cased) most likely meant, as documented; None if none."""
    if not key.startswith(KAFKA_PREFIX) and key in producer_keys:
        return KAFKA_PREFIX + key
    names = {name.lower(): name for name in SINK_OPTION_NAMES + SPARK_OPTION_NAMES}
    names.update({KAFKA_PREFIX + k: KAFKA_PREFIX + k for k in producer_keys})
    if key.startswith(KAFKA_PREFIX):
        bare = key[len(KAFKA_PREFIX) :]
        if bare in SINK_KEYS or bare in SPARK_KEYS:
            return names[bare]
        probes = [key]
    else:
        probes = [key, KAFKA_PREFIX + key]
    for probe in probes:
        found = difflib.get_close_matches(probe, names, n=1, cutoff=_CUTOFF)
        if found:
            return names[found[0]]
    return None


def unknown_option_message(key: str, producer_keys: Collection[str]) -> str:
    """One line: the unknown option, the closest valid one (or what is valid), the fix."""
    suggestion = closest_option(key, producer_keys)
    if suggestion is not None:
        return (
            f"unknown option '{key}' for format('pykafka'): did you mean '{suggestion}'? "
            f"Fix: .option('{suggestion}', ...)"
        )
    if key.startswith(KAFKA_PREFIX):
        return (
            f"unknown option '{key}' for format('pykafka'): '{key[len(KAFKA_PREFIX) :]}' is not "
            "a producer setting (the 'kafka.' options take Java's producer config names, "
            "e.g. kafka.linger.ms). Fix: correct or remove it"
        )
    return (
        f"unknown option '{key}' for format('pykafka'). Known options: "
        f"{', '.join(SINK_OPTION_NAMES)}, kafka.<producer setting> (e.g. kafka.linger.ms), "
        f"and Spark's {', '.join(SPARK_OPTION_NAMES)}"
    )
