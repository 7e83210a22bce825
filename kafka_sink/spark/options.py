"""Options of ``format("pykafka")``: parsed once on the driver into a picklable ``SinkOptions``.

Role: turn Spark's case-insensitive, all-string option map into the sink's settings and the
producer's config, refusing anything the sink would otherwise silently ignore.

Accepted keys (Spark lower-cases them before we see them):
- ``topic``: default topic; when set it overrides any ``topic`` column (as in Spark's sink).
- ``kafka.<key>``: producer config, passed on with the prefix removed (``kafka.linger.ms`` ->
  ``linger.ms``), keys lower-case, values unchanged.
- ``commitLog``: a local directory that receives one JSON file per driver commit.
- ``producerIdleTimeoutMs``: how long a worker keeps a cached producer no task uses before
  closing it (default 540000, Java's ``connections.max.idle.ms``; -1 never, 0 at the task's end).
- ``includeHeaders``: accepted for compatibility with ``format("kafka")`` option sets and ignored
  (a ``headers`` column is always written, as in Spark's sink).
- Spark's own ``path``, ``checkpointLocation`` and ``queryName``.

Sink defaults: where the user sets no ``kafka.batch.size``, the sink uses 262144 (256 KiB) instead
of the producer's 16384. A task hands the producer whole Arrow batches (10,000 rows by default)
and flushes at its end, so ``linger.ms`` never waits, and bigger record batches only cut the
per-batch work (one compression call, one CRC, one request entry each): about 1.6x the rows/s
with 116-byte records. Anything the user sets wins.

Invariants:
- ``kafka.key.serializer`` / ``kafka.value.serializer`` and every other unknown key are refused
  with a message saying what to do instead; nothing is dropped silently. (The sink's keys and
  values are DataFrame columns, already bytes or strings: serializing happens in the DataFrame.)
- ``kafka.interceptor.classes`` and ``kafka.partitioner.class`` are Python import paths; they are
  imported and checked on the driver (``validate_producer_config``), so a path that does not
  import fails naming the option before any task runs, and again on each executor when its
  producer is built (the module must be importable there too).
- The producer config is validated (``ProducerConfig.from_mapping``, no network) on the driver, so
  a bad ``kafka.*`` key fails before any task starts.
- ``repr(SinkOptions)`` names producer keys only, never values (they may hold passwords).
- The commit-log directory the sink will write (``commitLog``, or the default under a local
  ``checkpointLocation`` for a streaming query) is checked on the driver before any task runs:
  created, then a uniquely named probe file written and removed (``check_commit_dir``). An
  unwritable one fails with the path and the OS reason instead of after every record is in Kafka.
  Remote checkpoints have no default commit log, so nothing is checked for them.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlparse

from kafka_sink.errors import ConfigError
from kafka_sink.spark.errors import SinkOptionError
from kafka_sink.spark.producer_cache import DEFAULT_IDLE_TIMEOUT_MS

__all__ = [
    "COMMIT_LOG_DIRNAME",
    "KAFKA_PREFIX",
    "SINK_PRODUCER_DEFAULTS",
    "SinkOptions",
]

KAFKA_PREFIX = "kafka."
#: Sub-directory of a streaming query's checkpoint that holds the default commit log.
COMMIT_LOG_DIRNAME = "pykafka-commits"

_SINK_KEYS = frozenset({"topic", "commitlog", "includeheaders", "produceridletimeoutms"})
# Spark passes these to every writer: path from save(path)/start(path), checkpointLocation and
# queryName from writeStream. The sink has no use for path (a Kafka sink has no path).
_SPARK_KEYS = frozenset({"path", "checkpointlocation", "queryname"})

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
}

# Python import paths, resolved on the driver when the options are validated (and on executors).
_PLUGIN_KEYS = frozenset({"interceptor.classes", "partitioner.class"})

_DISABLED_WORDS = frozenset({"none", "false", "off", "disabled"})

#: Producer settings the sink uses when the options do not set them (see the module docstring).
SINK_PRODUCER_DEFAULTS: Mapping[str, str] = {"batch.size": "262144"}


@dataclass(frozen=True)
class SinkOptions:
    """The sink's settings, picklable and cheap to rebuild on every micro-batch."""

    topic: str | None
    #: Producer config as sorted (key, value) pairs: hashable, so it doubles as a cache key.
    producer_items: tuple[tuple[str, str], ...] = field(repr=False)
    #: The ``commitLog`` directory as given (absolute), None when not set.
    commit_log: str | None = None
    #: ``commitLog`` set to none/false/off: write no commit files at all.
    commit_log_disabled: bool = False
    checkpoint_location: str | None = None
    query_name: str | None = None
    #: ``producerIdleTimeoutMs``: ms a worker keeps an unused cached producer (-1: for good).
    producer_idle_timeout_ms: int = DEFAULT_IDLE_TIMEOUT_MS

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> SinkOptions:
        """Parse Spark's option map; raise :class:`SinkOptionError` naming the first bad key."""
        topic: str | None = None
        producer: dict[str, str] = {}
        commit_log: str | None = None
        disabled = False
        checkpoint: str | None = None
        query_name: str | None = None
        idle_timeout_ms = DEFAULT_IDLE_TIMEOUT_MS
        for raw_key, raw_value in options.items():
            key = raw_key.strip().lower()
            value = str(raw_value)
            if key.startswith(KAFKA_PREFIX):
                pkey = key[len(KAFKA_PREFIX) :]
                if not pkey:
                    raise SinkOptionError("option 'kafka.' has no producer key after the prefix")
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
            elif key == "commitlog":
                text = value.strip()
                if not text:
                    raise SinkOptionError(
                        "option 'commitLog' is empty: give a local directory for the commit "
                        "files, or 'none' to write none"
                    )
                if text.lower() in _DISABLED_WORDS:
                    disabled = True
                else:
                    commit_log = _local_dir("commitLog", text)
            elif key == "checkpointlocation":
                checkpoint = value.strip() or None
            elif key == "queryname":
                query_name = value.strip() or None
            elif key == "produceridletimeoutms":
                idle_timeout_ms = _idle_timeout_ms(value)
            elif key in _SINK_KEYS or key in _SPARK_KEYS:
                continue
            else:
                raise SinkOptionError(_unknown_option_message(key))
        if "bootstrap.servers" not in producer or not producer["bootstrap.servers"].strip():
            raise SinkOptionError(
                "option 'kafka.bootstrap.servers' is required: "
                ".option('kafka.bootstrap.servers', 'host1:9092,host2:9092')"
            )
        for pkey, default in SINK_PRODUCER_DEFAULTS.items():
            producer.setdefault(pkey, default)
        return cls(
            topic=topic,
            producer_items=tuple(sorted(producer.items())),
            commit_log=commit_log,
            commit_log_disabled=disabled,
            checkpoint_location=checkpoint,
            query_name=query_name,
            producer_idle_timeout_ms=idle_timeout_ms,
        )

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
            raise SinkOptionError(
                f"invalid producer option: {exc} (producer settings are the 'kafka.'-prefixed "
                "options with the prefix removed, e.g. kafka.linger.ms -> linger.ms)"
            ) from exc

    def commit_dir(self, *, streaming: bool) -> str | None:
        """Where commit files go: ``commitLog``, else (streaming) under the checkpoint.

        None when disabled, or for a batch write without ``commitLog``, or for a streaming query
        whose checkpoint is not an option (set through the session conf) or not a local path.
        """
        if self.commit_log_disabled:
            return None
        if self.commit_log is not None:
            return self.commit_log
        if streaming and self.checkpoint_location is not None:
            local = _as_local_path(self.checkpoint_location)
            if local is not None:
                return os.path.join(local, COMMIT_LOG_DIRNAME)
        return None

    def check_commit_dir(self, *, streaming: bool) -> str | None:
        """Make sure the driver can write the commit files; returns the directory (or None).

        Creates the directory, writes a uniquely named probe file into it and removes it, so a
        directory that cannot be created or written fails before any task sends a record (the
        commit files are written on the driver only after the tasks are done).
        """
        directory = self.commit_dir(streaming=streaming)
        if directory is None:
            return None
        try:
            _probe_dir(directory)
        except OSError as exc:
            raise SinkOptionError(self._commit_dir_message(directory, exc)) from exc
        return directory

    def _commit_dir_message(self, directory: str, exc: OSError) -> str:
        if isinstance(exc, FileExistsError) or (
            os.path.exists(directory) and not os.path.isdir(directory)
        ):
            reason = "it exists and is not a directory"
        else:
            reason = exc.strerror or type(exc).__name__
        if self.commit_log is not None:
            what = f"option 'commitLog' names a directory the driver cannot write: {directory}"
            fix = "give a writable local directory, or 'none' to write no commit files"
        else:
            what = (
                "the default commit log under option 'checkpointLocation' cannot be written "
                f"by the driver: {directory}"
            )
            fix = (
                "make the checkpoint writable, set option 'commitLog' to a writable local "
                "directory, or set it to 'none' to write no commit files"
            )
        return f"{what} ({reason}). Fix: {fix}."

    def __repr__(self) -> str:
        keys = ",".join(k for k, _ in self.producer_items)
        return (
            f"SinkOptions(topic={self.topic!r}, kafka=[{keys}], commit_log={self.commit_log!r}, "
            f"commit_log_disabled={self.commit_log_disabled}, "
            f"checkpoint_location={self.checkpoint_location!r}, query_name={self.query_name!r}, "
            f"producerIdleTimeoutMs={self.producer_idle_timeout_ms})"
        )


def _as_local_path(location: str) -> str | None:
    """A local filesystem path for ``location`` (plain path or file: URI), else None."""
    parsed = urlparse(location)
    if parsed.scheme == "":
        return os.path.abspath(location)
    if parsed.scheme == "file":
        return os.path.abspath(parsed.path)
    return None


def _probe_dir(directory: str) -> None:
    """Create ``directory`` and prove a file can be written and removed there (raises OSError)."""
    os.makedirs(directory, exist_ok=True)
    fd, probe = tempfile.mkstemp(prefix=".pykafka-probe-", suffix=".tmp", dir=directory)
    try:
        os.write(fd, b"probe\n")
    finally:
        os.close(fd)
        os.unlink(probe)


def _idle_timeout_ms(value: str) -> int:
    text = value.strip()
    if re.fullmatch(r"-?[0-9]+", text) is None or int(text) < -1:
        raise SinkOptionError(
            f"option 'producerIdleTimeoutMs' must be a whole number of milliseconds: how long a "
            f"worker keeps a producer no task uses (default {DEFAULT_IDLE_TIMEOUT_MS}), 0 to close "
            f"it when its task ends, or -1 to keep it until the worker exits; got {value!r}"
        )
    return int(text)


def _local_dir(option: str, location: str) -> str:
    local = _as_local_path(location)
    if local is None:
        raise SinkOptionError(
            f"option '{option}' must be a local directory (a path or a file: URI); "
            f"the scheme {urlparse(location).scheme!r} is not supported"
        )
    return local


def _unknown_option_message(key: str) -> str:
    hint = (
        f" Producer settings need the 'kafka.' prefix: .option('kafka.{key}', ...)."
        if "." in key
        else ""
    )
    return (
        f"unknown option '{key}' for format('pykafka').{hint} Known options: topic, commitLog, "
        "producerIdleTimeoutMs, kafka.* (producer config), includeHeaders, and Spark's path, "
        "checkpointLocation, queryName."
    )
