"""Subject name strategies: which registry subject a topic's key or value schema lives under.

Role: the three strategies of Confluent's serializers, under the names the options take
(``value.subject.name.strategy`` / ``key.subject.name.strategy``), as pure functions of the
topic, the side (key or value) and the record's full name:

- ``topic`` (default; Java's ``TopicNameStrategy``): ``<topic>-value`` / ``<topic>-key``;
- ``record`` (``RecordNameStrategy``): ``<record fullname>``, one subject per record type
  whatever the topic;
- ``topic_record`` (``TopicRecordNameStrategy``): ``<topic>-<record fullname>``.

The record's full name is the Avro record's ``namespace.name``, the Protobuf message's
``package.Message`` or the JSON Schema's ``title``, as Confluent's serializers take them; the
caller (the schema resolution on the driver) supplies it. With a topic column, the resolution
calls :func:`subject_name` once per topic.

Invariants: pure (no I/O, no pyspark); an unknown strategy, or a record strategy without a
record name, is a :class:`~kafka_sink.errors.ConfigError` naming the option and the accepted
values.
"""

from __future__ import annotations

from typing import Literal

from kafka_sink.errors import ConfigError

__all__ = [
    "STRATEGIES",
    "Side",
    "SubjectNameStrategy",
    "parse_strategy",
    "strategy_option",
    "subject_name",
]

Side = Literal["key", "value"]
SubjectNameStrategy = Literal["topic", "record", "topic_record"]
STRATEGIES: tuple[SubjectNameStrategy, ...] = ("topic", "record", "topic_record")

# Confluent's Java class names, accepted too so that a setting copied from a Java client works.
_JAVA_NAMES: dict[str, SubjectNameStrategy] = {
    "io.confluent.kafka.serializers.subject.topicnamestrategy": "topic",
    "io.confluent.kafka.serializers.subject.recordnamestrategy": "record",
    "io.confluent.kafka.serializers.subject.topicrecordnamestrategy": "topic_record",
}


def strategy_option(side: Side) -> str:
    """The option naming ``side``'s strategy (``value.subject.name.strategy``)."""
    return f"{side}.subject.name.strategy"


def parse_strategy(value: str | None, side: Side) -> SubjectNameStrategy:
    """``value`` of ``<side>.subject.name.strategy`` (None: the default, ``topic``)."""
    if value is None:
        return "topic"
    name = value.strip().lower()
    for strategy in STRATEGIES:
        if name == strategy:
            return strategy
    if name in _JAVA_NAMES:
        return _JAVA_NAMES[name]
    raise ConfigError(
        f"{strategy_option(side)}: unknown strategy {value!r}; use one of "
        f"{', '.join(STRATEGIES)} (topic: <topic>-{side}, record: the record's full name, "
        f"topic_record: <topic>-<record full name>)"
    )


def subject_name(
    strategy: SubjectNameStrategy, topic: str, side: Side, record_name: str | None = None
) -> str:
    """The subject ``strategy`` gives ``side`` of ``topic``'s records."""
    if strategy == "topic":
        return f"{topic}-{side}"
    if not record_name:
        raise ConfigError(
            f"{strategy_option(side)}={strategy} needs the record's full name (an Avro record, "
            f"a Protobuf message or a JSON Schema with a title); the {side} schema has none: "
            "give it one, or use the topic strategy"
        )
    if strategy == "record":
        return record_name
    return f"{topic}-{record_name}"
