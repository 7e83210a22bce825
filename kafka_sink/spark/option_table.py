"""The sink's options as one table: name, parser, default, where it applies, what it does.

Role: one row per option of ``format("pykafka")`` that the sink itself reads (Spark's ``path``,
``checkpointLocation`` and ``queryName`` included; the ``kafka.*`` producer settings and the
registry formats' keys are ``options.py``'s and ``formats/options.py``'s), each with the parser
of its value, the :class:`~kafka_sink.spark.options.SinkOptions` field it fills and that field's
value when the option is absent. ``SinkOptions.from_options`` loops over it, ``option_names``
derives the accepted names from it, and a unit test holds README's options table to it.

Invariants:
- A row's ``default`` is its ``SinkOptions`` field's default; a row without ``attr`` is accepted
  and ignored (``path``, ``includeHeaders``).
- A parser takes the option's text as Spark passes it and returns the field's value, or raises
  :class:`SinkOptionError` naming the option; no message grows with the value (``shown_value``,
  :func:`shown_location`).
- The sink's integer options are read as Java's ``Long.parseLong`` of the trimmed text reads
  them, narrowed to ASCII: an optional ``+``/``-`` and digits ``0``-``9`` (no ``_``, no other
  script's digits), within Java's ``long`` (``int`` for ``preflightTimeoutMs``). ``kafka.*``
  integers are Kafka's own (``net/config.py``). ``deadLetterMaxRatio``, the one fraction, is
  ASCII digits with an optional fraction and exponent, within ``[0, 1]`` (no ``nan``, ``inf``,
  ``_`` or ``%``).
- ``onRecordError`` is matched in any case and kept in its canonical spelling
  (``ON_RECORD_ERRORS``).
- ``commitLog`` and ``checkpointLocation`` longer than 4096 characters, holding a NUL, or with an
  unclosed ``[`` host are refused when parsed; ``commitLog`` set to none/false/off/disabled
  parses to None (no commit files), any other value to a local path or a store URI.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from urllib.parse import urlparse

from kafka_sink.errors import ConfigError
from kafka_sink.net.presets import preset_named
from kafka_sink.net.user_info import shown_value
from kafka_sink.sink_errors import SinkOptionError
from kafka_sink.spark.commit_log.store import STORE_SCHEMES, as_local_path, shown_location
from kafka_sink.spark.logs import LEVEL_NAMES, parse_level
from kafka_sink.spark.metrics.prometheus import DEFAULT_JOB, gateway_url, job_name

__all__ = [
    "AT_LEAST_ONCE",
    "DEFAULT_IDLE_TIMEOUT_MS",
    "DEFAULT_INTENT_TOPIC",
    "DEFAULT_PREFLIGHT_TIMEOUT_MS",
    "DELIVERY_GUARANTEES",
    "EXACTLY_ONCE",
    "INTENT_STORES",
    "INTENT_STORE_CHECKPOINT",
    "INTENT_STORE_KAFKA",
    "ON_RECORD_ERRORS",
    "ON_RECORD_ERROR_DEAD_LETTER",
    "ON_RECORD_ERROR_FAIL",
    "ON_RECORD_ERROR_SKIP",
    "OPTIONS_BY_KEY",
    "SINK_OPTIONS",
    "Applies",
    "SinkOption",
    "scheme",
    "shown_location",
]

#: How long a cached producer may stay unused before it is closed (``producerIdleTimeoutMs``).
DEFAULT_IDLE_TIMEOUT_MS = 540_000
DEFAULT_PREFLIGHT_TIMEOUT_MS = 15_000

AT_LEAST_ONCE = "at-least-once"
EXACTLY_ONCE = "exactly-once"
DELIVERY_GUARANTEES = (AT_LEAST_ONCE, EXACTLY_ONCE)
INTENT_STORE_KAFKA = "kafka"
INTENT_STORE_CHECKPOINT = "checkpoint"
INTENT_STORES = (INTENT_STORE_KAFKA, INTENT_STORE_CHECKPOINT)
DEFAULT_INTENT_TOPIC = "pykafka-commit-intents"
#: ``onRecordError``'s values: a bad row fails its task (the default), goes to the dead-letter
#: topic, or is left out (counted and logged).
ON_RECORD_ERROR_FAIL = "fail"
ON_RECORD_ERROR_DEAD_LETTER = "deadLetter"
ON_RECORD_ERROR_SKIP = "skip"
ON_RECORD_ERRORS = (ON_RECORD_ERROR_FAIL, ON_RECORD_ERROR_DEAD_LETTER, ON_RECORD_ERROR_SKIP)


class Applies(StrEnum):
    """Which writes an option means something for (the others refuse or ignore it)."""

    EVERY_WRITE = "both guarantees, batch and streaming"
    EXACTLY_ONCE = "exactly-once only"
    EXACTLY_ONCE_BATCH = "exactly-once batch writes only"
    STREAMING = "streaming only"


@dataclass(frozen=True)
class SinkOption:
    """One option: its documented name, parser, the field it fills and that field's default."""

    name: str
    parse: Callable[[str], Any] | None
    attr: str | None
    default: Any
    applies: Applies
    doc: str
    #: Spark's own option (``path``, ``checkpointLocation``, ``queryName``).
    spark: bool = False

    @property
    def key(self) -> str:
        """The name as Spark hands it over: lower-cased."""
        return self.name.lower()


# Kafka's legal topic names (Topic.java): 1-249 of these characters.
_TOPIC_RE = re.compile(r"[A-Za-z0-9._\-]{1,249}")
# Characters Kafka accepts in a transactional id are not restricted, but the sink builds ids
# from the prefix and lists them back by prefix: keep it to what reads back unambiguously.
_PREFIX_RE = re.compile(r"[A-Za-z0-9._\-]{1,200}")
# An idempotency key is hashed into the job's record key and default prefix, so any printable
# text fits (an orchestrator's run id, a date); the bound keeps log lines and records small.
_IDEMPOTENCY_KEY_RE = re.compile(r"[^\x00-\x1f\x7f]{1,200}")
_DISABLED_WORDS = frozenset({"none", "false", "off", "disabled"})
# Integers: Java's trim() (characters up to U+0020), a sign, ASCII digits; Java's int and long.
_JAVA_TRIM = "".join(chr(c) for c in range(0x21))
_SINK_INTEGER = re.compile(r"[+-]?[0-9]+")
# A ratio: ASCII digits with an optional fraction and exponent (no '_', 'nan', 'inf' or '%',
# which Python's float() or a reader might take otherwise).
_SINK_DECIMAL = re.compile(r"\+?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_LONG_DIGITS = 19
_MAX_INT = 2**31 - 1
_MAX_LONG = 2**63 - 1
# A location longer than Linux's PATH_MAX is no path; an object key is shorter still.
_MAX_LOCATION_CHARS = 4096


def scheme(location: str) -> str:
    """The lower-cased URI scheme of ``location`` ('' for a plain path)."""
    return urlparse(location).scheme.lower()


def _whole_number(value: str, lo: int, hi: int) -> int | None:
    """``value`` as the sink's integer options take it, or None when it is not one.

    Java's ``Long.parseLong`` of the trimmed text, narrowed: an optional sign and ASCII digits
    (no ``_``, no other script's digits), within ``[lo, hi]`` (at most Java's ``long``).
    """
    text = value.strip(_JAVA_TRIM)
    if _SINK_INTEGER.fullmatch(text) is None:
        return None
    if len(text.lstrip("+-").lstrip("0")) > _LONG_DIGITS:
        return None
    number = int(text)
    return number if lo <= number <= hi else None


def _topic(value: str) -> str:
    topic = value.strip()
    if not topic:
        raise SinkOptionError(
            "option 'topic' is empty: give a topic name, or remove the option and "
            "provide a string 'topic' column"
        )
    return topic


def _preset(value: str) -> str:
    try:
        return preset_named(value, origin="option 'preset'").name
    except ConfigError as exc:
        raise SinkOptionError(str(exc)) from None


def _checked_location(option: str, location: str) -> str:
    """``location`` if it can be a path or URI at all: bounded, and a URI that parses."""
    if len(location) > _MAX_LOCATION_CHARS:
        raise SinkOptionError(
            f"option '{option}' is {len(location)} characters long; a location has at most "
            f"{_MAX_LOCATION_CHARS} (Linux's PATH_MAX). Fix: give a shorter path or URI"
        )
    if "\x00" in location:
        raise SinkOptionError(
            f"option '{option}' holds a NUL character, which no path or URI may hold: "
            f"{shown_location(location)}"
        )
    try:
        urlparse(location)  # an unclosed bracketed host raises ValueError
    except ValueError:
        raise SinkOptionError(
            f"option '{option}' is not a valid path or URI (an unclosed '[' host): "
            f"{shown_location(location)}. Fix: "
            "a local directory, or a URI such as s3a://bucket/dir or hdfs://namenode:8020/dir"
        ) from None
    return location


def _commit_log(value: str) -> str | None:
    """The commit-log location (a local path or a store URI); None: write no commit files."""
    text = value.strip()
    if not text:
        raise SinkOptionError(
            "option 'commitLog' is empty: give a directory for the commit files "
            "(a local path or an s3a://, gs://, abfss:// or hdfs:// URI), or 'none' "
            "to write none"
        )
    if text.lower() in _DISABLED_WORDS:
        return None
    location = _checked_location("commitLog", text)
    local = as_local_path(location)
    if local is not None:
        return local
    location_scheme = scheme(location)
    if location_scheme not in STORE_SCHEMES:
        raise SinkOptionError(
            f"option 'commitLog' has the scheme {shown_value(location_scheme)}, which the "
            "commit log cannot be written to. Fix: a local directory (a path or a file: URI), "
            "or an s3/s3a/s3n, gs/gcs, abfs/abfss/wasb/wasbs or hdfs URI, or 'none' to write "
            "no commit files."
        )
    return location.rstrip("/")


def _checkpoint_location(value: str) -> str | None:
    return _checked_location("checkpointLocation", value.strip()) or None


def _query_name(value: str) -> str | None:
    return value.strip() or None


def _idle_timeout_ms(value: str) -> int:
    number = _whole_number(value, -1, _MAX_LONG)
    if number is None:
        raise SinkOptionError(
            f"option 'producerIdleTimeoutMs' must be a whole number of milliseconds: how long a "
            f"worker keeps a producer no task uses (default {DEFAULT_IDLE_TIMEOUT_MS}), 0 to close "
            f"it when its task ends, or -1 to keep it until the worker exits; got "
            f"{shown_value(value)}"
        )
    return number


def _preflight_timeout_ms(value: str) -> int:
    number = _whole_number(value, 1, _MAX_INT)
    if number is None:
        raise SinkOptionError(
            "option 'preflightTimeoutMs' must be a whole number of milliseconds from 1 to "
            f"{_MAX_INT}: how long the driver's checks of the cluster (brokers reachable, topic "
            f"present, ACLs) may take before any task runs (default "
            f"{DEFAULT_PREFLIGHT_TIMEOUT_MS}); got {shown_value(value)}"
        )
    return number


def _delivery_guarantee(value: str) -> str:
    text = value.strip().lower()
    if text not in DELIVERY_GUARANTEES:
        raise SinkOptionError(
            f"option 'deliveryGuarantee' must be one of {', '.join(DELIVERY_GUARANTEES)} "
            f"(case-insensitive); got {shown_value(value)}"
        )
    return text


def _transactional_id_prefix(value: str) -> str:
    text = value.strip()
    if _PREFIX_RE.fullmatch(text) is None:
        raise SinkOptionError(
            "option 'transactionalIdPrefix' must be 1 to 200 characters among letters, digits, "
            "'.', '_' and '-' (the sink appends '-<partition>-<slot>' to it); got "
            f"{shown_value(value)}"
        )
    return text


def _intent_store(value: str) -> str:
    text = value.strip().lower()
    if text not in INTENT_STORES:
        raise SinkOptionError(
            f"option 'intentStore' must be one of {', '.join(INTENT_STORES)} (case-insensitive): "
            "'kafka' keeps exactly-once commit intents in a compacted topic of the cluster "
            "(survives the loss of the driver host), 'checkpoint' in files under a local "
            f"checkpointLocation; got {shown_value(value)}"
        )
    return text


def _intent_topic(value: str) -> str:
    text = value.strip()
    if _TOPIC_RE.fullmatch(text) is None or text in (".", ".."):
        raise SinkOptionError(
            "option 'intentTopic' must be a Kafka topic name (1 to 249 letters, digits, '.', '_' "
            f"and '-'); got {shown_value(value)}"
        )
    return text


def _idempotency_key(value: str) -> str:
    text = value.strip()
    if _IDEMPOTENCY_KEY_RE.fullmatch(text) is None:
        raise SinkOptionError(
            "option 'idempotencyKey' must be 1 to 200 printable characters naming the job's "
            "data (the same key on every re-run of the same job, e.g. the orchestrator's run "
            f"date); got {shown_value(value, 40)}"
        )
    return text


def _on_record_error(value: str) -> str:
    text = value.strip()
    for policy in ON_RECORD_ERRORS:
        if text.lower() == policy.lower():
            return policy
    raise SinkOptionError(
        f"option 'onRecordError' must be one of {', '.join(ON_RECORD_ERRORS)} (any case): "
        "'fail' fails the task on a row Kafka cannot take, 'deadLetter' writes the row to "
        "option 'deadLetterTopic', 'skip' leaves it out (counted and logged); got "
        f"{shown_value(value)}"
    )


def _dead_letter_topic(value: str) -> str:
    text = value.strip()
    if _TOPIC_RE.fullmatch(text) is None or text in (".", ".."):
        raise SinkOptionError(
            "option 'deadLetterTopic' must be a Kafka topic name (1 to 249 letters, digits, "
            f"'.', '_' and '-'); got {shown_value(value)}"
        )
    return text


def _dead_letter_max_records(value: str) -> int:
    number = _whole_number(value, 0, _MAX_LONG)
    if number is None:
        raise SinkOptionError(
            "option 'deadLetterMaxRecords' must be a whole number from 0 up: the most bad rows "
            "one batch may have before it fails (leave the option out for no bound); got "
            f"{shown_value(value)}"
        )
    return number


def _dead_letter_max_ratio(value: str) -> float:
    text = value.strip(_JAVA_TRIM)
    ratio = float(text) if _SINK_DECIMAL.fullmatch(text) is not None else None
    if ratio is None or not 0.0 <= ratio <= 1.0:
        raise SinkOptionError(
            "option 'deadLetterMaxRatio' must be a number from 0 to 1: the largest share of a "
            "batch's rows that may be bad before the batch fails (0.01 for 1%; leave the option "
            f"out for no bound); got {shown_value(value)}"
        )
    return ratio


def _log_level(value: str) -> int:
    level = parse_level(value)
    if level is None:
        raise SinkOptionError(
            f"option 'logLevel' is {shown_value(value)}: give one of {LEVEL_NAMES} (any case), "
            "e.g. .option('logLevel', 'WARN')"
        )
    return level


_EVERY = Applies.EVERY_WRITE

#: The sink's options, in the order its messages list them (Spark's own last).
SINK_OPTIONS: tuple[SinkOption, ...] = (
    SinkOption(
        "topic",
        _topic,
        "topic",
        None,
        _EVERY,
        "default topic; overrides any 'topic' column (as in Spark's sink)",
    ),
    SinkOption(
        "preset",
        _preset,
        "preset",
        None,
        _EVERY,
        "a managed service (msk-iam, confluent-cloud, event-hubs, google) whose settings "
        "fill in the kafka.* options left out (net/presets.py)",
    ),
    SinkOption(
        "commitLog",
        _commit_log,
        "commit_log",
        None,
        _EVERY,
        "directory (local path or store URI) of one JSON file per commit; 'none' writes "
        "none; streaming default <checkpointLocation>/pykafka-commits",
    ),
    SinkOption(
        "producerIdleTimeoutMs",
        _idle_timeout_ms,
        "producer_idle_timeout_ms",
        DEFAULT_IDLE_TIMEOUT_MS,
        _EVERY,
        "ms a worker keeps a cached producer no task uses (-1 never closes it, 0 at the "
        "task's end)",
    ),
    SinkOption(
        "preflightTimeoutMs",
        _preflight_timeout_ms,
        "preflight_timeout_ms",
        DEFAULT_PREFLIGHT_TIMEOUT_MS,
        _EVERY,
        "bound of the driver's checks of the cluster before any task runs (preflight.py)",
    ),
    SinkOption(
        "deliveryGuarantee",
        _delivery_guarantee,
        "delivery_guarantee",
        AT_LEAST_ONCE,
        _EVERY,
        "at-least-once or exactly-once (case-insensitive)",
    ),
    SinkOption(
        "transactionalIdPrefix",
        _transactional_id_prefix,
        "transactional_id_prefix",
        None,
        Applies.EXACTLY_ONCE,
        "start of every transactional id of the write (default derived from the query or "
        "write id; eos_plan.py)",
    ),
    SinkOption(
        "intentStore",
        _intent_store,
        "intent_store",
        INTENT_STORE_KAFKA,
        Applies.EXACTLY_ONCE,
        "where the driver records commit intents: kafka (a compacted topic) or checkpoint "
        "(files under a local checkpointLocation)",
    ),
    SinkOption(
        "intentTopic",
        _intent_topic,
        "intent_topic",
        DEFAULT_INTENT_TOPIC,
        Applies.EXACTLY_ONCE,
        "the intent topic of intentStore=kafka, created compacted when missing",
    ),
    SinkOption(
        "idempotencyKey",
        _idempotency_key,
        "idempotency_key",
        None,
        Applies.EXACTLY_ONCE_BATCH,
        "names the job so a re-run with the same key writes nothing already written "
        "(a streaming write refuses it in datasource.py)",
    ),
    SinkOption(
        "logLevel",
        _log_level,
        "log_level",
        None,
        _EVERY,
        "the sink's log level on the driver and in the tasks (default: Spark's conf "
        "spark.pykafka.logLevel, else INFO; logs.py)",
    ),
    SinkOption(
        "onRecordError",
        _on_record_error,
        "on_record_error",
        ON_RECORD_ERROR_FAIL,
        _EVERY,
        "what a row Kafka cannot take does: fail (its task fails), deadLetter (written to "
        "deadLetterTopic) or skip (left out, counted and logged)",
    ),
    SinkOption(
        "deadLetterTopic",
        _dead_letter_topic,
        "dead_letter_topic",
        None,
        _EVERY,
        "the topic onRecordError=deadLetter writes bad rows to (required for it); checked "
        "before any task like the topic option's",
    ),
    SinkOption(
        "deadLetterMaxRecords",
        _dead_letter_max_records,
        "dead_letter_max_records",
        None,
        _EVERY,
        "more bad rows than this in one batch fail the batch (deadLetter or skip); default "
        "no bound",
    ),
    SinkOption(
        "deadLetterMaxRatio",
        _dead_letter_max_ratio,
        "dead_letter_max_ratio",
        None,
        _EVERY,
        "a larger share (0 to 1) of a batch's rows bad fails the batch (deadLetter or skip); "
        "default no bound",
    ),
    SinkOption(
        "includeHeaders",
        None,
        None,
        None,
        _EVERY,
        "accepted for option sets shared with format('kafka') and ignored: a headers "
        "column is always written",
    ),
    SinkOption(
        "metricsPushGateway",
        gateway_url,
        "metrics_push_gateway",
        None,
        _EVERY,
        "Prometheus Pushgateway URL the driver pushes each batch's metrics to (needs the "
        "prometheus extra)",
    ),
    SinkOption(
        "metricsJob",
        job_name,
        "metrics_job",
        DEFAULT_JOB,
        _EVERY,
        "the Pushgateway job the metrics are pushed under; only with metricsPushGateway",
    ),
    SinkOption(
        "path",
        None,
        None,
        None,
        _EVERY,
        "Spark's, from save(path) / start(path); ignored",
        spark=True,
    ),
    SinkOption(
        "checkpointLocation",
        _checkpoint_location,
        "checkpoint_location",
        None,
        Applies.STREAMING,
        "Spark's query checkpoint; holds the default commit log and intentStore=checkpoint",
        spark=True,
    ),
    SinkOption(
        "queryName",
        _query_name,
        "query_name",
        None,
        Applies.STREAMING,
        "Spark's query name",
        spark=True,
    ),
)

#: The rows by the lower-cased key Spark hands over.
OPTIONS_BY_KEY: Mapping[str, SinkOption] = {row.key: row for row in SINK_OPTIONS}
