"""Options of ``format("pykafka")``: parsed once on the driver into a picklable ``SinkOptions``.

Role: turn Spark's case-insensitive, all-string option map into the sink's settings and the
producer's config, refusing anything the sink would otherwise silently ignore.

Accepted keys (Spark lower-cases them before we see them; their names, and the suggestion an
unknown one gets, are ``option_names.py``'s):
- ``topic``: default topic; when set it overrides any ``topic`` column (as in Spark's sink).
- ``kafka.<key>``: producer config, passed on with the prefix removed (``kafka.linger.ms`` ->
  ``linger.ms``), keys lower-case, values unchanged.
- ``preset``: a managed service's settings (``msk-iam``, ``confluent-cloud``, ``event-hubs``,
  ``google``; ``net/presets.py``) applied to the ``kafka.*`` options: it fills in only what they
  leave out, and refuses a value outside the service's limits naming the option.
- ``commitLog``: the directory that receives one JSON file per driver commit: a local path,
  a ``file:`` URI, or a store URI (``s3a://``, ``gs://``, ``abfss://``, ``hdfs://``; see
  ``commit_log/store.py``).
- ``producerIdleTimeoutMs``: how long a worker keeps a cached producer no task uses before
  closing it (default 540000, Java's ``connections.max.idle.ms``; -1 never, 0 at the task's end).
- ``preflightTimeoutMs``: the bound of the driver's checks of the cluster before any task runs
  (brokers reachable, topic present, the principal's ACLs; ``preflight.py``), default 15000.
- ``deliveryGuarantee``: ``at-least-once`` (default) or ``exactly-once`` (case-insensitive).
- ``transactionalIdPrefix``: exactly-once only; the start of every transactional id the write
  uses (default: ``pykafka-<query id>`` for a streaming query, ``pykafka-<write id>`` for a batch
  job; see ``eos/plan.py``).
- ``intentStore``: exactly-once only; where the driver records each batch's commit intent:
  ``kafka`` (default, a compacted topic on the cluster, survives the loss of the driver host) or
  ``checkpoint`` (files under a local ``checkpointLocation``).
- ``intentTopic``: exactly-once with ``intentStore=kafka``; the topic (default
  ``pykafka-commit-intents``, created compacted when missing; see ``eos/kafka_intents.py``).
- ``idempotencyKey``: exactly-once batch writes only; names the job so that a re-run with the
  same key writes nothing already written (see ``eos/idempotency.py``). Kept as given (case
  matters), 1 to 200 printable characters; a streaming write refuses it (``datasource.py``).
- ``includeHeaders``: accepted for compatibility with ``format("kafka")`` option sets and ignored
  (a ``headers`` column is always written, as in Spark's sink).
- ``logLevel``: the sink's log level (``DEBUG``, ``INFO``, ``WARN``/``WARNING``, ``ERROR``,
  ``OFF``, any case), on the driver and in the tasks; it wins over Spark's conf
  ``spark.pykafka.logLevel`` (see ``logs.py``).
- ``metricsPushGateway``: a Prometheus Pushgateway URL (``http(s)://host:port``, or
  ``host:port``); the driver pushes each batch's metrics there (``spark/metrics/prometheus.py``).
  Needs ``prometheus-client`` (the ``prometheus`` extra), checked on the driver when parsed.
- ``metricsJob``: the Pushgateway job the metrics are pushed under (default ``pykafka``); only
  with ``metricsPushGateway``.
- Spark's own ``path``, ``checkpointLocation`` and ``queryName``.
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
  ``shown_value`` (its first characters, then its length), a location through ``_location``;
  ``commitLog`` and ``checkpointLocation`` longer than 4096 characters, holding a NUL, or with
  an unclosed ``[`` host are refused when parsed.
- The sink's integer options (``producerIdleTimeoutMs``, ``preflightTimeoutMs``) are read as
  Java's ``Long.parseLong`` of the trimmed text reads them, narrowed to ASCII: an optional
  ``+``/``-`` and digits ``0``-``9`` (no ``_``, no other script's digits), within Java's ``long``
  (``int`` for ``preflightTimeoutMs``). ``kafka.*`` integers are Kafka's own
  (``net/config.py``: ``Integer.parseInt``/``Long.parseLong``, any Unicode digits).
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
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from urllib.parse import urlparse

from kafka_sink.errors import ConfigError
from kafka_sink.formats.options import is_format_key
from kafka_sink.net.presets import apply_preset, preset_named
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
from kafka_sink.spark.logs import LEVEL_NAMES, parse_level, warn_once
from kafka_sink.spark.metrics.prometheus import DEFAULT_JOB, gateway_url, job_name
from kafka_sink.spark.option_names import (
    KAFKA_PREFIX,
    SINK_KEYS,
    SPARK_KEYS,
    unknown_option_message,
)

__all__ = [
    "AT_LEAST_ONCE",
    "COMMIT_LOG_DIRNAME",
    "DEFAULT_IDLE_TIMEOUT_MS",
    "DELIVERY_GUARANTEES",
    "EXACTLY_ONCE",
    "KAFKA_PREFIX",
    "SINK_PRODUCER_DEFAULTS",
    "SinkOptions",
]

#: How long a cached producer may stay unused before it is closed (``producerIdleTimeoutMs``).
DEFAULT_IDLE_TIMEOUT_MS = 540_000

#: Sub-directory of a streaming query's checkpoint that holds the default commit log.
COMMIT_LOG_DIRNAME = "pykafka-commits"

AT_LEAST_ONCE = "at-least-once"
EXACTLY_ONCE = "exactly-once"
DELIVERY_GUARANTEES = (AT_LEAST_ONCE, EXACTLY_ONCE)
INTENT_STORE_KAFKA = "kafka"
INTENT_STORE_CHECKPOINT = "checkpoint"
INTENT_STORES = (INTENT_STORE_KAFKA, INTENT_STORE_CHECKPOINT)
DEFAULT_INTENT_TOPIC = "pykafka-commit-intents"
DEFAULT_PREFLIGHT_TIMEOUT_MS = 15_000
# Kafka's legal topic names (Topic.java): 1-249 of these characters.
_TOPIC_RE = re.compile(r"[A-Za-z0-9._\-]{1,249}")
# Characters Kafka accepts in a transactional id are not restricted, but the sink builds ids
# from the prefix and lists them back by prefix: keep it to what reads back unambiguously.
_PREFIX_RE = re.compile(r"[A-Za-z0-9._\-]{1,200}")
# An idempotency key is hashed into the job's record key and default prefix, so any printable
# text fits (an orchestrator's run id, a date); the bound keeps log lines and records small.
_IDEMPOTENCY_KEY_RE = re.compile(r"[^\x00-\x1f\x7f]{1,200}")
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

_DISABLED_WORDS = frozenset({"none", "false", "off", "disabled"})

# Integers: Java's trim() (characters up to U+0020), a sign, ASCII digits; Java's int and long.
_JAVA_TRIM = "".join(chr(c) for c in range(0x21))
_SINK_INTEGER = re.compile(r"[+-]?[0-9]+")
_LONG_DIGITS = 19
_MAX_INT = 2**31 - 1
_MAX_LONG = 2**63 - 1
# A location longer than Linux's PATH_MAX is no path; an object key is shorter still.
_MAX_LOCATION_CHARS = 4096
# No option name is longer (Kafka's longest producer key is under 60 characters).
_MAX_KEY_CHARS = 200
# How much of a location a message shows (then its length).
_SHOWN_LOCATION_CHARS = 200

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

    @property
    def exactly_once(self) -> bool:
        return self.delivery_guarantee == EXACTLY_ONCE

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> SinkOptions:
        """Parse Spark's option map; raise :class:`SinkOptionError` naming the first bad key."""
        topic: str | None = None
        preset: str | None = None
        producer: dict[str, str] = {}
        commit_log: str | None = None
        disabled = False
        checkpoint: str | None = None
        query_name: str | None = None
        idle_timeout_ms = DEFAULT_IDLE_TIMEOUT_MS
        preflight_timeout_ms = DEFAULT_PREFLIGHT_TIMEOUT_MS
        guarantee = AT_LEAST_ONCE
        prefix: str | None = None
        store: str | None = None
        intent_topic: str | None = None
        idempotency_key: str | None = None
        log_level: int | None = None
        push_gateway: str | None = None
        metrics_job: str | None = None
        for raw_key, raw_value in options.items():
            key = raw_key.strip().lower()
            value = str(raw_value)
            if key.startswith(KAFKA_PREFIX):
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
                producer[pkey] = value
            elif key == "topic":
                topic = value.strip() or None
                if topic is None:
                    raise SinkOptionError(
                        "option 'topic' is empty: give a topic name, or remove the option and "
                        "provide a string 'topic' column"
                    )
            elif key == "preset":
                preset = _preset(value)
            elif key == "commitlog":
                text = value.strip()
                if not text:
                    raise SinkOptionError(
                        "option 'commitLog' is empty: give a directory for the commit files "
                        "(a local path or an s3a://, gs://, abfss:// or hdfs:// URI), or 'none' "
                        "to write none"
                    )
                if text.lower() in _DISABLED_WORDS:
                    disabled = True
                else:
                    commit_log = _commit_log_location(_checked_location("commitLog", text))
            elif key == "checkpointlocation":
                checkpoint = _checked_location("checkpointLocation", value.strip()) or None
            elif key == "queryname":
                query_name = value.strip() or None
            elif key == "produceridletimeoutms":
                idle_timeout_ms = _idle_timeout_ms(value)
            elif key == "preflighttimeoutms":
                preflight_timeout_ms = _preflight_timeout_ms(value)
            elif key == "deliveryguarantee":
                guarantee = _delivery_guarantee(value)
            elif key == "transactionalidprefix":
                prefix = _transactional_id_prefix(value)
            elif key == "intentstore":
                store = _intent_store(value)
            elif key == "intenttopic":
                intent_topic = _intent_topic(value)
            elif key == "idempotencykey":
                idempotency_key = _idempotency_key(value)
            elif key == "loglevel":
                log_level = _log_level(value)
            elif key == "metricspushgateway":
                push_gateway = gateway_url(value)
            elif key == "metricsjob":
                metrics_job = job_name(value)
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
        if "bootstrap.servers" not in producer or not producer["bootstrap.servers"].strip():
            raise SinkOptionError(
                "option 'kafka.bootstrap.servers' is required: "
                ".option('kafka.bootstrap.servers', 'host1:9092,host2:9092')"
            )
        if preset is not None:
            producer = _with_preset(preset, producer)
        for pkey, default in SINK_PRODUCER_DEFAULTS.items():
            producer.setdefault(pkey, default)
        if guarantee == EXACTLY_ONCE:
            _force_exactly_once_settings(producer)
        else:
            for name, given in (
                ("transactionalIdPrefix", prefix),
                ("intentStore", store),
                ("intentTopic", intent_topic),
                ("idempotencyKey", idempotency_key),
            ):
                if given is not None:
                    raise SinkOptionError(
                        f"option '{name}' is only used with deliveryGuarantee=exactly-once; set "
                        ".option('deliveryGuarantee', 'exactly-once') or remove it"
                    )
        if metrics_job is not None and push_gateway is None:
            raise SinkOptionError(
                "option 'metricsJob' names the Pushgateway job of option 'metricsPushGateway', "
                "which is not set; set .option('metricsPushGateway', 'http://host:9091') or "
                "remove 'metricsJob'"
            )
        if intent_topic is not None and store == INTENT_STORE_CHECKPOINT:
            raise SinkOptionError(
                "option 'intentTopic' names the topic of intentStore=kafka, but intentStore is "
                "'checkpoint'; remove one of them"
            )
        return cls(
            topic=topic,
            preset=preset,
            producer_items=tuple(sorted(producer.items())),
            commit_log=commit_log,
            commit_log_disabled=disabled,
            checkpoint_location=checkpoint,
            query_name=query_name,
            producer_idle_timeout_ms=idle_timeout_ms,
            preflight_timeout_ms=preflight_timeout_ms,
            delivery_guarantee=guarantee,
            transactional_id_prefix=prefix,
            intent_store=store or INTENT_STORE_KAFKA,
            intent_topic=intent_topic or DEFAULT_INTENT_TOPIC,
            idempotency_key=idempotency_key,
            log_level=log_level,
            metrics_push_gateway=push_gateway,
            metrics_job=metrics_job or DEFAULT_JOB,
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
            if _scheme(self.checkpoint_location) in STORE_SCHEMES:
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
                scheme = _scheme(self.checkpoint_location)
                if as_local_path(self.checkpoint_location) is None:
                    self._warn_no_default_log(
                        f"the scheme {shown_value(scheme)} is not one the commit log can be "
                        "written to"
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
                    f"{_location(location)} ({exc}). Fix: give a local directory or "
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
        checkpoint = _location(self.checkpoint_location or "")
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
        shown = _location(location)
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
            f"metricsJob={self.metrics_job!r})"
        )


def _shown(location: str | None) -> str | None:
    return None if location is None else display_location(location)


def _masked(url: str | None) -> str | None:
    return None if url is None else mask_url(url)


def _capped(text: str | None) -> str:
    return "None" if text is None else shown_value(text)


def _location(location: str) -> str:
    """A location as a message shows it: no password, and capped (paths can be any length)."""
    shown = display_location(location)
    if len(shown) <= _SHOWN_LOCATION_CHARS:
        return shown
    return f"{shown[:_SHOWN_LOCATION_CHARS]}…({len(shown)} characters)"


def _scheme(location: str) -> str:
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


def _preset(value: str) -> str:
    try:
        return preset_named(value, origin="option 'preset'").name
    except ConfigError as exc:
        raise SinkOptionError(str(exc)) from None


def _with_preset(preset: str, producer: Mapping[str, str]) -> dict[str, str]:
    """The producer options with the preset's settings filled in, its limits checked."""
    try:
        applied = apply_preset(preset, producer, key_prefix=KAFKA_PREFIX, origin="option 'preset'")
    except ConfigError as exc:
        raise SinkOptionError(f"{exc}") from None
    return {key: str(value) for key, value in applied.items()}


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
            f"{_location(location)}"
        )
    try:
        urlparse(location)  # an unclosed bracketed host raises ValueError
    except ValueError:
        raise SinkOptionError(
            f"option '{option}' is not a valid path or URI (an unclosed '[' host): "
            f"{_location(location)}. Fix: "
            "a local directory, or a URI such as s3a://bucket/dir or hdfs://namenode:8020/dir"
        ) from None
    return location


def _commit_log_location(location: str) -> str:
    local = as_local_path(location)
    if local is not None:
        return local
    scheme = _scheme(location)
    if scheme not in STORE_SCHEMES:
        raise SinkOptionError(
            f"option 'commitLog' has the scheme {shown_value(scheme)}, which the commit log "
            "cannot be written to. Fix: a local directory (a path or a file: URI), or an "
            "s3/s3a/s3n, gs/gcs, abfs/abfss/wasb/wasbs or hdfs URI, or 'none' to write no "
            "commit files."
        )
    return location.rstrip("/")


def _log_level(value: str) -> int:
    level = parse_level(value)
    if level is None:
        raise SinkOptionError(
            f"option 'logLevel' is {shown_value(value)}: give one of {LEVEL_NAMES} (any case), "
            "e.g. .option('logLevel', 'WARN')"
        )
    return level


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
