"""Options of ``format("pykafka")``: parsed once on the driver into a picklable ``SinkOptions``.

Role: turn Spark's case-insensitive, all-string option map into the sink's settings and the
producer's config, refusing anything the sink would otherwise silently ignore.

Accepted keys (Spark lower-cases them before we see them; the suggestion an unknown one gets is
``option_names.py``'s):
- The sink's own and Spark's ``path``, ``checkpointLocation`` and ``queryName``: one row each in
  ``option_table.SINK_OPTIONS`` (name, parser, default, the writes it applies to, what it does);
  README's options table is checked against it by a unit test.
- ``kafka.<key>``: producer config, passed on with the prefix removed (``kafka.linger.ms`` ->
  ``linger.ms``), keys lower-case, values unchanged. ``preset`` fills in only what they leave
  out, and refuses a value outside the service's limits naming the option (``net/presets.py``).
- The registry formats' keys (``valueFormat``, ``keyFormat``, ``schema.registry.*`` and the
  rest) are left to ``formats/options.py``, which parses and refuses them.

Sink defaults: where the user sets no ``kafka.batch.size``, the sink uses 262144 (256 KiB) instead
of the producer's 16384. A task hands the producer whole Arrow batches (10,000 rows by default)
and flushes at its end, so ``linger.ms`` never waits, and bigger record batches only cut the
per-batch work (one compression call, one CRC, one request entry each): about 1.6x the rows/s
with 116-byte records. Anything the user sets wins.

Exactly-once mode forces ``acks=all`` and idempotence (a conflicting ``kafka.acks`` or
``kafka.enable.idempotence=false`` is refused). Its ``transaction.timeout.ms`` default and upper
bound come from the brokers (``eos/timeout.py``), learned on the driver before any task runs.

Invariants:
- ``kafka.key.serializer`` / ``kafka.value.serializer``, ``kafka.transactional.id`` and every
  unknown key are refused with a message saying what to do instead; nothing is dropped silently.
  An unknown key (a sink option, or a ``kafka.`` key that is not a producer setting) is named
  with the closest valid one before any other check, so a misspelled required option is not
  reported missing. (The sink's keys and
  values are DataFrame columns, already bytes or strings: serializing happens in the DataFrame.)
- ``kafka.interceptor.classes`` and ``kafka.partitioner.class`` are Python import paths; they are
  imported and checked on the driver (``validate_producer_config``), so a path that does not
  import fails naming the option before any task runs, and again on each executor when its
  producer is built (the module must be importable there too).
- The producer config is validated (``ProducerConfig.from_mapping``, no network) on the driver, so
  a bad ``kafka.*`` key fails before any task starts.
- ``repr(SinkOptions)`` names producer keys only, never values (they may hold passwords), and
  shows locations and the Pushgateway URL with any password in their user info masked.
- Every bad value gives a :class:`SinkOptionError` naming the option (never a raw
  ``ValueError``/``OSError``), and no message grows with the value: a value is quoted through
  ``shown_value`` (its first characters, then its length), a location through ``shown_location``;
  ``commitLog`` and ``checkpointLocation`` longer than 4096 characters, holding a NUL, or with
  an unclosed ``[`` host are refused when parsed.
- The sink's integer options are read as Java's ``Long.parseLong`` reads them, narrowed to
  ASCII digits (``option_table.py``); ``kafka.*`` integers are Kafka's own (``net/config.py``).
- The bad-record options (``onRecordError``, ``deadLetterTopic``, ``deadLetterMaxRecords``,
  ``deadLetterMaxRatio``) are applied together or refused: ``deadLetter`` without its topic, a
  dead-letter topic without ``deadLetter``, a bound with ``fail``, and a dead-letter topic that
  is the ``topic`` option's or (exactly-once, ``intentStore=kafka``) the intent topic.
- The commit-log directory the sink will write (``commitLog``, or the default
  ``<checkpointLocation>/pykafka-commits`` for a streaming query, local or in a store) is checked
  on the driver before any task runs: created, then a uniquely named probe file written and
  removed (``check_commit_dir``). An unwritable one fails with the location and the reason
  (credentials masked) instead of after every record is in Kafka. A streaming query's location
  is probed once per driver-side Python process (Spark plans and commits every micro-batch in
  long-lived workers): its first micro-batch pays the probe, not every one, which matters in an
  object store, where a probe is two requests.
- A ``commitLog`` that cannot be written here is refused: an unknown scheme when parsing, a
  store whose client is missing (HDFS without libhdfs) when checked. A default under a
  checkpoint the sink cannot write to logs one WARNING per driver (``logs.warn_once``) saying
  that no commit files will be written and why, and the query runs on without them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kafka_sink.errors import ConfigError
from kafka_sink.formats.options import is_format_key
from kafka_sink.net.presets import apply_preset
from kafka_sink.net.user_info import mask_url, shown_value
from kafka_sink.sink_errors import SinkOptionError
from kafka_sink.spark.commit_log.store import (
    STORE_SCHEMES,
    CommitStoreError,
    CommitStoreUnavailableError,
    as_local_path,
    display_location,
    join,
    open_store,
    store_hint,
)
from kafka_sink.spark.logs import warn_once
from kafka_sink.spark.metrics.prometheus import DEFAULT_JOB
from kafka_sink.spark.option_names import (
    KAFKA_PREFIX,
    SINK_KEYS,
    SPARK_KEYS,
    unknown_option_message,
)
from kafka_sink.spark.option_table import (
    AT_LEAST_ONCE,
    DEFAULT_IDLE_TIMEOUT_MS,
    DEFAULT_INTENT_TOPIC,
    DEFAULT_PREFLIGHT_TIMEOUT_MS,
    DELIVERY_GUARANTEES,
    EXACTLY_ONCE,
    INTENT_STORE_CHECKPOINT,
    INTENT_STORE_KAFKA,
    INTENT_STORES,
    ON_RECORD_ERROR_DEAD_LETTER,
    ON_RECORD_ERROR_FAIL,
    OPTIONS_BY_KEY,
    SINK_OPTIONS,
    Applies,
    scheme,
    shown_location,
)

__all__ = [
    "AT_LEAST_ONCE",
    "COMMIT_LOG_DIRNAME",
    "DEFAULT_IDLE_TIMEOUT_MS",
    "DEFAULT_INTENT_TOPIC",
    "DEFAULT_PREFLIGHT_TIMEOUT_MS",
    "DELIVERY_GUARANTEES",
    "EXACTLY_ONCE",
    "INTENT_STORES",
    "INTENT_STORE_CHECKPOINT",
    "INTENT_STORE_KAFKA",
    "KAFKA_PREFIX",
    "SINK_PRODUCER_DEFAULTS",
    "SinkOptions",
]

#: Sub-directory of a streaming query's checkpoint that holds the default commit log.
COMMIT_LOG_DIRNAME = "pykafka-commits"

_REFUSED_KAFKA_KEYS = {
    "key.serializer": (
        "keys are written as bytes (binary columns as they are, string columns as UTF-8), as "
        "Spark's Kafka sink does with its forced ByteArraySerializer; serialize in the DataFrame "
        "instead (CAST(... AS STRING), to_json, to_avro)"
    ),
    "value.serializer": (
        "values are written as bytes (binary columns as they are, string columns as UTF-8), as "
        "Spark's Kafka sink does with its forced ByteArraySerializer; serialize in the DataFrame "
        "instead (CAST(... AS STRING), to_json, to_avro)"
    ),
    "transactional.id": (
        "every task of the write would share that id and fence the others' producers. For "
        "transactions use .option('deliveryGuarantee', 'exactly-once'): each task attempt then "
        "gets its own transactional id, built from option 'transactionalIdPrefix' (default "
        "derived from the query id, or the batch job's write id)"
    ),
}

# Python import paths, resolved on the driver when the options are validated (and on executors).
_PLUGIN_KEYS = frozenset({"interceptor.classes", "partitioner.class"})

# Streaming commit locations this process has probed successfully (see check_commit_dir).
_PROBED: set[str] = set()

# No option name is longer (Kafka's longest producer key is under 60 characters).
_MAX_KEY_CHARS = 200

#: Producer settings the sink uses when the options do not set them (see the module docstring).
SINK_PRODUCER_DEFAULTS: Mapping[str, str] = {"batch.size": "262144"}


@dataclass(frozen=True)
class SinkOptions:
    """The sink's settings, picklable and cheap to rebuild on every micro-batch."""

    topic: str | None
    #: Producer config as sorted (key, value) pairs: hashable, so it doubles as a cache key.
    producer_items: tuple[tuple[str, str], ...] = field(repr=False)
    #: ``preset``: the managed service whose settings the producer config carries (lower-case).
    preset: str | None = None
    #: The ``commitLog`` directory: an absolute local path or a store URI; None when not set.
    commit_log: str | None = None
    #: ``commitLog`` set to none/false/off: write no commit files at all.
    commit_log_disabled: bool = False
    checkpoint_location: str | None = None
    query_name: str | None = None
    #: ``producerIdleTimeoutMs``: ms a worker keeps an unused cached producer (-1: for good).
    producer_idle_timeout_ms: int = DEFAULT_IDLE_TIMEOUT_MS
    #: ``preflightTimeoutMs``: the bound of the driver's checks of the cluster (``preflight.py``).
    preflight_timeout_ms: int = DEFAULT_PREFLIGHT_TIMEOUT_MS
    #: ``deliveryGuarantee``: ``at-least-once`` or ``exactly-once``.
    delivery_guarantee: str = AT_LEAST_ONCE
    #: ``transactionalIdPrefix`` as given (exactly-once); None: derived from the query/write id.
    transactional_id_prefix: str | None = None
    #: ``intentStore`` (exactly-once): ``kafka`` or ``checkpoint``.
    intent_store: str = INTENT_STORE_KAFKA
    #: ``intentTopic`` (exactly-once, ``intentStore=kafka``).
    intent_topic: str = DEFAULT_INTENT_TOPIC
    #: ``idempotencyKey`` (exactly-once batch writes); None: every run writes everything.
    idempotency_key: str | None = None
    #: ``logLevel`` as a ``logging`` level; None: Spark's conf, else INFO (``logs.py``).
    log_level: int | None = None
    #: ``metricsPushGateway``: the Pushgateway URL each batch's metrics go to; None: no push.
    metrics_push_gateway: str | None = None
    #: ``metricsJob``: the Pushgateway job name.
    metrics_job: str = DEFAULT_JOB
    #: ``onRecordError``: ``fail`` (a bad row fails its task), ``deadLetter`` or ``skip``.
    on_record_error: str = ON_RECORD_ERROR_FAIL
    #: ``deadLetterTopic``: where ``deadLetter`` writes bad rows (required for it).
    dead_letter_topic: str | None = None
    #: ``deadLetterMaxRecords``: more bad rows than this in one batch fail it; None: no bound.
    dead_letter_max_records: int | None = None
    #: ``deadLetterMaxRatio``: a larger share of a batch's rows bad fails it; None: no bound.
    dead_letter_max_ratio: float | None = None

    @property
    def exactly_once(self) -> bool:
        return self.delivery_guarantee == EXACTLY_ONCE

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> SinkOptions:
        """Parse Spark's option map; raise :class:`SinkOptionError` naming the first bad key.

        Each option is parsed by its row of ``SINK_OPTIONS`` (``option_table.py``) in the order
        given, the ``kafka.*`` ones gathered as the producer config; then the checks between
        options run, and every option left out takes its row's default.
        """
        given: dict[str, Any] = {}
        producer: dict[str, str] = {}
        for raw_key, raw_value in options.items():
            key = raw_key.strip().lower()
            value = str(raw_value)
            if key.startswith(KAFKA_PREFIX):
                producer[_producer_key(key)] = value
            elif (row := OPTIONS_BY_KEY.get(key)) is not None:
                if row.parse is not None and row.attr is not None:
                    given[row.attr] = row.parse(value)
            elif key in SINK_KEYS or key in SPARK_KEYS or is_format_key(key):
                # The formats' keys are parsed (and refused) by formats/options.py.
                continue
            elif len(key) > _MAX_KEY_CHARS:
                raise SinkOptionError(
                    f"unknown option {shown_value(key)} for format('pykafka'): no option name "
                    f"is that long. Fix: correct or remove it"
                )
            else:
                raise SinkOptionError(unknown_option_message(key, _producer_keys()))
        _refuse_unknown_producer_keys(producer)
        _require_bootstrap_servers(producer)
        if given.get("preset") is not None:
            producer = _with_preset(given["preset"], producer)
        for pkey, default in SINK_PRODUCER_DEFAULTS.items():
            producer.setdefault(pkey, default)
        if given.get("delivery_guarantee", AT_LEAST_ONCE) == EXACTLY_ONCE:
            _force_exactly_once_settings(producer)
        else:
            _refuse_exactly_once_options(given)
        _refuse_metrics_job_without_gateway(given)
        _refuse_intent_topic_with_checkpoint_store(given)
        _check_bad_record_options(given)
        fields = {row.attr: given.get(row.attr, row.default) for row in SINK_OPTIONS if row.attr}
        return cls(
            producer_items=tuple(sorted(producer.items())),
            # commitLog's row parses none/false/off/disabled to None.
            commit_log_disabled="commit_log" in given and given["commit_log"] is None,
            **fields,
        )

    def with_producer_setting(self, key: str, value: str) -> SinkOptions:
        """A copy whose producer config has ``key`` set to ``value``."""
        items = dict(self.producer_items)
        items[key] = value
        return replace(self, producer_items=tuple(sorted(items.items())))

    @property
    def producer_config(self) -> dict[str, str]:
        """The producer's config: Kafka's dotted keys, ``kafka.`` prefix removed."""
        return dict(self.producer_items)

    def validate_producer_config(self) -> None:
        """Build the producer's config object (no network) so bad keys fail on the driver."""
        from kafka_sink.producer.config import ProducerConfig

        try:
            ProducerConfig.from_mapping(self.producer_config)
        except ConfigError as exc:
            key, _, why = str(exc).partition(": ")
            if key in _PLUGIN_KEYS:
                raise SinkOptionError(
                    f"option 'kafka.{key}': {why} (the sink resolves it on the driver and on "
                    "every executor: the module must be installed in their Python environment "
                    "or shipped with spark.submit.pyFiles / SparkContext.addPyFile)"
                ) from exc
            if why and key in _producer_keys():
                raise SinkOptionError(f"option 'kafka.{key}' is invalid: {why}") from exc
            raise SinkOptionError(
                f"invalid producer option: {exc} (producer settings are the 'kafka.'-prefixed "
                "options with the prefix removed, e.g. kafka.linger.ms -> linger.ms)"
            ) from exc

    def commit_dir(self, *, streaming: bool) -> str | None:
        """Where commit files go: ``commitLog``, else (streaming) under the checkpoint.

        A local path or a store URI. None when disabled, for a batch write without
        ``commitLog``, or for a streaming query whose checkpoint is not an option (set through
        the session conf) or in a store the commit log cannot be written to.
        """
        if self.commit_log_disabled:
            return None
        if self.commit_log is not None:
            return self.commit_log
        if streaming and self.checkpoint_location is not None:
            local = as_local_path(self.checkpoint_location)
            if local is not None:
                return os.path.join(local, COMMIT_LOG_DIRNAME)
            if scheme(self.checkpoint_location) in STORE_SCHEMES:
                return join(self.checkpoint_location, COMMIT_LOG_DIRNAME)
        return None

    def check_commit_dir(self, *, streaming: bool) -> str | None:
        """Make sure the driver can write the commit files; returns the location (or None).

        Creates the directory, writes a uniquely named probe file into it and removes it, so a
        location that cannot be created or written fails before any task sends a record (the
        commit files are written on the driver only after the tasks are done). A default under
        a checkpoint the sink cannot write to warns (once per driver) and returns None. For a
        streaming query a location that passed is not probed again in this process: every
        micro-batch calls this twice (planning and commit), and its commit writes there anyway.
        """
        location = self.commit_dir(streaming=streaming)
        if location is None:
            if streaming and not self.commit_log_disabled and self.checkpoint_location:
                location_scheme = scheme(self.checkpoint_location)
                if as_local_path(self.checkpoint_location) is None:
                    self._warn_no_default_log(
                        f"the scheme {shown_value(location_scheme)} is not one the commit log "
                        "can be written to"
                    )
            return None
        if streaming and location in _PROBED:
            return location
        try:
            open_store(location).probe()
        except CommitStoreUnavailableError as exc:
            if self.commit_log is not None:
                raise SinkOptionError(
                    f"option 'commitLog' names a location this driver cannot write to: "
                    f"{shown_location(location)} ({exc}). Fix: give a local directory or "
                    "another store, or 'none' to write no commit files."
                ) from None
            self._warn_no_default_log(str(exc))
            return None
        except OSError as exc:
            raise SinkOptionError(self._commit_dir_message(location, exc)) from None
        if streaming:
            _PROBED.add(location)
        return location

    def _warn_no_default_log(self, why: str) -> None:
        checkpoint = shown_location(self.checkpoint_location or "")
        warn_once(
            f"no-commit-log:{checkpoint}",
            f"pykafka: no commit files will be written for checkpoint {checkpoint}: {why}. "
            "Each commit is still logged (one INFO line). To keep commit files, set option "
            "'commitLog' to a local directory or a supported store; 'none' silences this.",
        )

    def _commit_dir_message(self, location: str, exc: OSError) -> str:
        local = as_local_path(location)
        if isinstance(exc, CommitStoreError):
            reason = str(exc)
        elif isinstance(exc, FileExistsError) or (
            local is not None and os.path.exists(local) and not os.path.isdir(local)
        ):
            reason = "it exists and is not a directory"
        else:
            reason = exc.strerror or type(exc).__name__
        shown = shown_location(location)
        if local is not None:
            where, place = "a directory", "a writable local directory"
        else:
            where, place = "a location", "a writable location"
            reason = f"{reason}; {store_hint(location)}"
        if self.commit_log is not None:
            what = f"option 'commitLog' names {where} the driver cannot write: {shown}"
            fix = f"give {place}, or 'none' to write no commit files"
        else:
            what = (
                "the default commit log under option 'checkpointLocation' cannot be written "
                f"by the driver: {shown}"
            )
            fix = (
                f"make the checkpoint writable, set option 'commitLog' to {place}, or set it "
                "to 'none' to write no commit files"
            )
        return f"{what} ({reason}). Fix: {fix}."

    def __repr__(self) -> str:
        keys = ",".join(k for k, _ in self.producer_items)
        return (
            f"SinkOptions(topic={_capped(self.topic)}, preset={self.preset!r}, kafka=[{keys}], "
            f"commit_log={_capped(_shown(self.commit_log))}, "
            f"commit_log_disabled={self.commit_log_disabled}, "
            f"checkpoint_location={_capped(_shown(self.checkpoint_location))}, "
            f"query_name={_capped(self.query_name)}, "
            f"producerIdleTimeoutMs={self.producer_idle_timeout_ms}, "
            f"preflightTimeoutMs={self.preflight_timeout_ms}, "
            f"deliveryGuarantee={self.delivery_guarantee!r}, "
            f"transactionalIdPrefix={self.transactional_id_prefix!r}, "
            f"intentStore={self.intent_store!r}, intentTopic={self.intent_topic!r}, "
            f"idempotencyKey={self.idempotency_key!r}, "
            f"logLevel={self.log_level!r}, "
            f"metricsPushGateway={_capped(_masked(self.metrics_push_gateway))}, "
            f"metricsJob={self.metrics_job!r}, "
            f"onRecordError={self.on_record_error!r}, "
            f"deadLetterTopic={_capped(self.dead_letter_topic)}, "
            f"deadLetterMaxRecords={self.dead_letter_max_records!r}, "
            f"deadLetterMaxRatio={self.dead_letter_max_ratio!r})"
        )


def _shown(location: str | None) -> str | None:
    return None if location is None else display_location(location)


def _masked(url: str | None) -> str | None:
    return None if url is None else mask_url(url)


def _capped(text: str | None) -> str:
    return "None" if text is None else shown_value(text)


def _with_preset(preset: str, producer: Mapping[str, str]) -> dict[str, str]:
    """The producer options with the preset's settings filled in, its limits checked."""
    try:
        applied = apply_preset(preset, producer, key_prefix=KAFKA_PREFIX, origin="option 'preset'")
    except ConfigError as exc:
        raise SinkOptionError(f"{exc}") from None
    return {key: str(value) for key, value in applied.items()}


def _force_exactly_once_settings(producer: dict[str, str]) -> None:
    """acks=all and idempotence are what a transaction needs: refuse a conflicting setting."""
    acks = producer.get("acks")
    if acks is not None and acks.strip().lower() not in ("all", "-1"):
        raise SinkOptionError(
            f"option 'kafka.acks' is {shown_value(acks)}, but deliveryGuarantee=exactly-once "
            "writes with acks=all (a transaction commits only records every in-sync replica "
            "has). Fix: remove 'kafka.acks' or set it to 'all'"
        )
    idempotence = producer.get("enable.idempotence")
    if idempotence is not None and idempotence.strip().lower() != "true":
        raise SinkOptionError(
            f"option 'kafka.enable.idempotence' is {shown_value(idempotence)}, but "
            "deliveryGuarantee=exactly-once needs the idempotent producer (transactions are "
            "built on it). Fix: remove 'kafka.enable.idempotence' or set it to 'true'"
        )
    producer["acks"] = "all"
    producer["enable.idempotence"] = "true"


def _producer_keys() -> frozenset[str]:
    from kafka_sink.producer.config import ProducerConfig

    return ProducerConfig.accepted_keys()


def _refuse_unknown_producer_keys(producer: Mapping[str, str]) -> None:
    """Name a misspelled ``kafka.*`` key before the required one it may hide is reported."""
    known = _producer_keys()
    for pkey in producer:
        if pkey not in known and len(pkey) > _MAX_KEY_CHARS:
            raise SinkOptionError(
                f"unknown option {shown_value(KAFKA_PREFIX + pkey)} for format('pykafka'): no "
                "producer setting is that long. Fix: correct or remove it"
            )
        if pkey not in known:
            raise SinkOptionError(unknown_option_message(KAFKA_PREFIX + pkey, known))


def _producer_key(key: str) -> str:
    """The producer setting a ``kafka.`` option names, its prefix removed; refused ones raise."""
    pkey = key[len(KAFKA_PREFIX) :]
    if not pkey:
        raise SinkOptionError(
            "option 'kafka.' has no producer setting after the prefix. Fix: "
            "name one, e.g. .option('kafka.linger.ms', '5'), or remove the option"
        )
    if pkey in _REFUSED_KAFKA_KEYS:
        raise SinkOptionError(
            f"option 'kafka.{pkey}' is not supported: {_REFUSED_KAFKA_KEYS[pkey]}"
        )
    return pkey


def _require_bootstrap_servers(producer: Mapping[str, str]) -> None:
    if "bootstrap.servers" not in producer or not producer["bootstrap.servers"].strip():
        raise SinkOptionError(
            "option 'kafka.bootstrap.servers' is required: "
            ".option('kafka.bootstrap.servers', 'host1:9092,host2:9092')"
        )


def _refuse_exactly_once_options(given: Mapping[str, object]) -> None:
    """An at-least-once write given an option of exactly-once's is refused (table order)."""
    for row in SINK_OPTIONS:
        exactly_once_only = row.applies in (Applies.EXACTLY_ONCE, Applies.EXACTLY_ONCE_BATCH)
        if exactly_once_only and row.attr in given:
            raise SinkOptionError(
                f"option '{row.name}' is only used with deliveryGuarantee=exactly-once; set "
                ".option('deliveryGuarantee', 'exactly-once') or remove it"
            )


def _refuse_metrics_job_without_gateway(given: Mapping[str, object]) -> None:
    if "metrics_job" in given and "metrics_push_gateway" not in given:
        raise SinkOptionError(
            "option 'metricsJob' names the Pushgateway job of option 'metricsPushGateway', "
            "which is not set; set .option('metricsPushGateway', 'http://host:9091') or "
            "remove 'metricsJob'"
        )


def _refuse_intent_topic_with_checkpoint_store(given: Mapping[str, object]) -> None:
    if "intent_topic" in given and given.get("intent_store") == INTENT_STORE_CHECKPOINT:
        raise SinkOptionError(
            "option 'intentTopic' names the topic of intentStore=kafka, but intentStore is "
            "'checkpoint'; remove one of them"
        )


def _check_bad_record_options(given: Mapping[str, object]) -> None:
    """The bad-record options fit together: each one given is applied, or the write is refused.

    ``deadLetter`` needs its topic; the topic means nothing to ``fail`` or ``skip``, the bounds
    nothing to ``fail``; and the dead letters may not go where the good rows or the commit
    intents go (a reader could not tell them apart; the intent topic is compacted by key).
    """
    policy = given.get("on_record_error", ON_RECORD_ERROR_FAIL)
    dead_letter_topic = given.get("dead_letter_topic")
    shown = shown_value(str(dead_letter_topic))
    if policy == ON_RECORD_ERROR_DEAD_LETTER and dead_letter_topic is None:
        raise SinkOptionError(
            "option 'onRecordError' is deadLetter, which needs option 'deadLetterTopic': the "
            "topic the bad rows are written to. Fix: .option('deadLetterTopic', 'orders-dlq'), "
            "or set onRecordError to skip or fail"
        )
    if policy == ON_RECORD_ERROR_FAIL:
        for attr, name in (
            ("dead_letter_topic", "deadLetterTopic"),
            ("dead_letter_max_records", "deadLetterMaxRecords"),
            ("dead_letter_max_ratio", "deadLetterMaxRatio"),
        ):
            if attr in given:
                raise SinkOptionError(
                    f"option '{name}' is only used with onRecordError=deadLetter or skip, but "
                    "onRecordError is fail (the default: a bad row fails its task). Fix: set "
                    f".option('onRecordError', 'deadLetter') or 'skip', or remove '{name}'"
                )
    if dead_letter_topic is None:
        return
    if policy != ON_RECORD_ERROR_DEAD_LETTER:
        raise SinkOptionError(
            f"option 'deadLetterTopic' is only used with onRecordError=deadLetter, but "
            f"onRecordError is {policy} (bad rows are left out, not written). Fix: set "
            ".option('onRecordError', 'deadLetter'), or remove 'deadLetterTopic'"
        )
    if dead_letter_topic == given.get("topic"):
        raise SinkOptionError(
            f"option 'deadLetterTopic' is {shown}, the topic of option 'topic': the bad rows "
            "would land among the good ones. Fix: give them a topic of their own, e.g. "
            "'<topic>-dlq'"
        )
    exactly_once = given.get("delivery_guarantee", AT_LEAST_ONCE) == EXACTLY_ONCE
    in_kafka = given.get("intent_store", INTENT_STORE_KAFKA) == INTENT_STORE_KAFKA
    intent_topic = given.get("intent_topic", DEFAULT_INTENT_TOPIC)
    if exactly_once and in_kafka and dead_letter_topic == intent_topic:
        raise SinkOptionError(
            f"option 'deadLetterTopic' is {shown}, the intent topic of exactly-once (option "
            "'intentTopic'), where the driver keeps its commit records. Fix: give the dead "
            "letters a topic of their own"
        )
