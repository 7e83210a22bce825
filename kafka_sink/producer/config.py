"""ProducerConfig: Kafka's dotted producer keys in, a validated, typed, immutable config out.

Role: the boundary between user (or Spark) options and the producer. Every key is a Java
``ProducerConfig`` name with the Java 4.x default; values may arrive as strings (Spark passes every
option as a string) or already typed. Everything else in the producer reads snake_case attributes.
The keys every client shares (bootstrap, security, timings, socket buffers) and their parsing come
from :class:`~kafka_sink.net.config.ClientConfig`, which ``ProducerConfig`` extends with the
producer's own keys; its :meth:`~kafka_sink.net.config.ClientConfig.network_config` gives the
network client's settings.

Invariants:
- Those of ``ClientConfig``, for every key: an unknown key, a value of the wrong type or out of
  range, or a cross-field conflict raises :class:`~kafka_sink.errors.ConfigError` naming the key,
  at construction, never later; secrets never appear in ``repr()`` or in error messages; no
  security setting is accepted and ignored.
- Idempotence follows Java's rules (KIP-679): on by default; silently turned off when the user
  explicitly chose acks != all, retries = 0 or more than 5 in-flight requests without explicitly
  asking for idempotence; a ConfigError when idempotence was explicitly requested together with
  one of those.
- ``delivery.timeout.ms`` covers at least ``linger.ms + request.timeout.ms`` (raised to it when
  not set; a ConfigError when set lower).
- Plugins (``key.serializer``, ``value.serializer``, ``partitioner.class``,
  ``interceptor.classes``, ``metrics.reporter``, ``metric.reporters``) are import paths or
  objects; a path is imported and every plugin's shape checked here
  (``producer.plugins.check_plugin``), but the config keeps the path string, so it pickles,
  and nothing is instantiated until a producer is built.
  ``repr()`` shows a plugin by its path or qualified name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from kafka_sink.errors import ConfigError
from kafka_sink.net.config import (
    ACCEPTED_NO_EFFECT,
    CLIENT_KEYS,
    MAX_INT,
    MAX_LONG,
    ClientConfig,
    ConfigKey,
    choice,
    int_in,
    opt_str,
    parse_bool,
)
from kafka_sink.net.user_info import shown_value
from kafka_sink.producer.plugins import (
    INTERCEPTORS_KEY,
    METRIC_REPORTERS_KEY,
    METRICS_REPORTER_KEY,
    check_plugin,
    describe,
)

_COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")


def _parse_acks(key: str, raw: object) -> int:
    text = str(raw).strip().lower() if not isinstance(raw, bool) else ""
    if text == "all":
        return -1
    if text in ("-1", "0", "1"):
        return int(text)
    shown = shown_value(raw) if isinstance(raw, str) else repr(raw)
    raise ConfigError(f"{key}: expected one of all, -1, 0, 1; got {shown}")


def _parse_plugin(key: str, raw: object) -> object:
    """An import path (kept as the string, so the config stays picklable) or an object."""
    if raw is None:
        return None
    if isinstance(raw, str):
        raw = raw.strip()
        if not raw:
            return None
    check_plugin(key, raw)
    return raw


def _parse_plugins(key: str, raw: object) -> tuple[object, ...]:
    """A list, or a comma-separated string as in Java, of import paths or objects."""
    if raw is None:
        return ()
    items = raw.split(",") if isinstance(raw, str) else raw
    if not isinstance(items, list | tuple):
        items = [items]  # one object
    out = []
    for item in items:
        spec = _parse_plugin(key, item)
        if spec is not None:
            out.append(spec)
    return tuple(out)


_PRODUCER_KEYS: dict[str, ConfigKey] = {
    "acks": ConfigKey(-1, _parse_acks, "acks"),
    "linger.ms": ConfigKey(5, int_in(), "linger_ms"),
    "batch.size": ConfigKey(16384, int_in(), "batch_size"),
    "buffer.memory": ConfigKey(33554432, int_in(0, MAX_LONG), "buffer_memory"),
    "max.block.ms": ConfigKey(60000, int_in(0, MAX_LONG), "max_block_ms"),
    "compression.type": ConfigKey("none", choice(*_COMPRESSION_TYPES), "compression_type"),
    "compression.gzip.level": ConfigKey(-1, int_in(-1, 9), "compression_gzip_level"),
    "compression.lz4.level": ConfigKey(9, int_in(1, 17), "compression_lz4_level"),
    "compression.zstd.level": ConfigKey(3, int_in(-131072, 22), "compression_zstd_level"),
    "enable.idempotence": ConfigKey(True, parse_bool, "enable_idempotence"),
    "delivery.timeout.ms": ConfigKey(120000, int_in(), "delivery_timeout_ms"),
    "retries": ConfigKey(MAX_INT, int_in(), "retries"),
    "max.in.flight.requests.per.connection": ConfigKey(5, int_in(1), "max_in_flight"),
    "max.request.size": ConfigKey(1048576, int_in(1), "max_request_size"),
    "metadata.max.idle.ms": ConfigKey(300000, int_in(5000, MAX_LONG), "metadata_max_idle_ms"),
    "partitioner.ignore.keys": ConfigKey(False, parse_bool, "partitioner_ignore_keys"),
    "key.serializer": ConfigKey(None, _parse_plugin, "key_serializer"),
    "value.serializer": ConfigKey(None, _parse_plugin, "value_serializer"),
    "partitioner.class": ConfigKey(None, _parse_plugin, "partitioner_class"),
    INTERCEPTORS_KEY: ConfigKey((), _parse_plugins, "interceptor_classes"),
    "transactional.id": ConfigKey(None, opt_str, "transactional_id"),
    "transaction.timeout.ms": ConfigKey(60000, int_in(1), "transaction_timeout_ms"),
    METRICS_REPORTER_KEY: ConfigKey(None, _parse_plugin, "metrics_reporter"),
    "metrics.sample.window.ms": ConfigKey(30000, int_in(1, MAX_LONG), "metrics_sample_window_ms"),
    "metrics.num.samples": ConfigKey(2, int_in(1), "metrics_num_samples"),
    # Java's list form of metrics.reporter: each one is told of every metric too.
    METRIC_REPORTERS_KEY: ConfigKey((), _parse_plugins, "metric_reporters"),
    # Java's levels, checked; every metric here is recorded at each of them.
    "metrics.recording.level": ConfigKey(
        "INFO", choice("INFO", "DEBUG", "TRACE", upper=True), "metrics_recording_level"
    ),
}
_METRICS_KEYS = frozenset(
    {
        "metrics.sample.window.ms",
        "metrics.num.samples",
        METRIC_REPORTERS_KEY,
        "metrics.recording.level",
    }
)

_PLUGIN_ATTRS = frozenset(
    {
        "key_serializer",
        "value_serializer",
        "partitioner_class",
        "interceptor_classes",
        "metrics_reporter",
        "metric_reporters",
    }
)


@dataclass(frozen=True, kw_only=True, repr=False)
class ProducerConfig(ClientConfig):
    """Validated producer settings; build with :meth:`from_mapping`."""

    _KEYS: ClassVar[Mapping[str, ConfigKey]] = {**CLIENT_KEYS, **_PRODUCER_KEYS}
    # Java's adaptive-partitioning tuning: this partitioner is the sticky one, without it.
    _NO_EFFECT: ClassVar[frozenset[str]] = (ACCEPTED_NO_EFFECT - _METRICS_KEYS) | {
        "partitioner.availability.timeout.ms",
        "partitioner.adaptive.partitioning.enable",
    }
    _KIND: ClassVar[str] = "producer"

    acks: int
    linger_ms: int
    batch_size: int
    buffer_memory: int
    max_block_ms: int
    compression_type: str
    compression_gzip_level: int
    compression_lz4_level: int
    compression_zstd_level: int
    enable_idempotence: bool
    delivery_timeout_ms: int
    retries: int
    max_in_flight: int
    max_request_size: int
    metadata_max_idle_ms: int
    partitioner_ignore_keys: bool
    #: Plugins: an import path (str) or the object as given; see ``producer.plugins``.
    key_serializer: object
    value_serializer: object
    partitioner_class: object
    interceptor_classes: tuple[object, ...]
    transactional_id: str | None
    transaction_timeout_ms: int
    metrics_reporter: object
    metric_reporters: tuple[object, ...]
    metrics_recording_level: str
    metrics_sample_window_ms: int
    metrics_num_samples: int

    @property
    def compression_level(self) -> int | None:
        """The level for the configured codec, or None for the codec's own default."""
        if self.compression_type == "gzip":
            return None if self.compression_gzip_level == -1 else self.compression_gzip_level
        if self.compression_type == "lz4":
            return self.compression_lz4_level
        if self.compression_type == "zstd":
            return self.compression_zstd_level
        return None

    def _shown(self, name: str, value: object) -> object:
        if name not in _PLUGIN_ATTRS or value is None:
            return value
        if name in {"interceptor_classes", "metric_reporters"}:
            return [describe(v) for v in value]  # type: ignore[attr-defined]
        return describe(value)

    @classmethod
    def _validate_own(cls, v: dict[str, Any], explicit: set[str]) -> None:
        # Idempotence (Java ProducerConfig.postProcessAndValidateIdempotenceConfigs).
        idempotence_explicit = "enable.idempotence" in explicit
        if v["enable_idempotence"]:
            conflicts = []
            if "max.in.flight.requests.per.connection" in explicit and v["max_in_flight"] > 5:
                conflicts.append(
                    ("max.in.flight.requests.per.connection", "must be at most 5 for idempotence")
                )
            if "retries" in explicit and v["retries"] == 0:
                conflicts.append(("retries", "must be non-zero for idempotence"))
            if "acks" in explicit and v["acks"] != -1:
                conflicts.append(("acks", "must be all (-1) for idempotence"))
            if conflicts:
                if idempotence_explicit or v["transactional_id"] is not None:
                    key, why = conflicts[0]
                    raise ConfigError(
                        f"{key}: {why}; it conflicts with enable.idempotence=true "
                        "(set enable.idempotence=false to use it)"
                    )
                v["enable_idempotence"] = False
        if v["transactional_id"] is not None and not v["enable_idempotence"]:
            raise ConfigError(
                "transactional.id: cannot be set without also enabling idempotence "
                "(enable.idempotence=false conflicts)"
            )

        # delivery.timeout.ms must cover one linger plus one request (Java's rule).
        floor = v["linger_ms"] + v["request_timeout_ms"]
        if v["delivery_timeout_ms"] < floor:
            if "delivery.timeout.ms" in explicit:
                raise ConfigError(
                    f"delivery.timeout.ms: {v['delivery_timeout_ms']} must be at least "
                    f"linger.ms + request.timeout.ms = {floor}"
                )
            v["delivery_timeout_ms"] = floor
