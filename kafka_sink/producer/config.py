"""ProducerConfig: Kafka's dotted producer keys in, a validated, typed, immutable config out.

Role: the boundary between user (or Spark) options and the producer. Every key is a Java
``ProducerConfig`` name with the Java 4.x default; values may arrive as strings (Spark passes every
option as a string) or already typed. Everything else in the producer reads snake_case attributes.

Invariants:
- An unknown key, a value of the wrong type or out of range, or a cross-field conflict raises
  :class:`~kafka_sink.errors.ConfigError` naming the key, at construction, never later.
- Idempotence follows Java's rules (KIP-679): on by default; silently turned off when the user
  explicitly chose acks != all, retries = 0 or more than 5 in-flight requests without explicitly
  asking for idempotence; a ConfigError when idempotence was explicitly requested together with
  one of those.
- Secrets (``sasl.password``, ``sasl.jaas.config``, ``ssl.*password``, ``ssl.keystore.key``) never
  appear in ``repr()`` or in error messages.
- No security setting is accepted and ignored: every ``ssl.*`` key is applied by
  :class:`~kafka_sink.net.tls.TlsConfig` (checked here, at construction) or refused; ``ssl.*`` keys
  without TLS and ``sasl.*`` keys without SASL are refused; the JVM-only security keys are
  accepted only with Java's default value, which describes what OpenSSL does anyway.
- Plugins (``key.serializer``, ``value.serializer``, ``partitioner.class``,
  ``interceptor.classes``) are import paths or objects; a path is imported and every plugin's
  shape checked here (``producer.plugins.check_plugin``), but the config keeps the path string,
  so it pickles, and nothing is instantiated until a producer is built. ``repr()`` shows a
  plugin by its path or qualified name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from kafka_sink.errors import ConfigError
from kafka_sink.net.jaas import parse_jaas
from kafka_sink.net.tls import TlsConfig
from kafka_sink.producer.plugins import INTERCEPTORS_KEY, check_plugin, describe

MAX_INT = 2**31 - 1
MAX_LONG = 2**63 - 1

SECRET_KEYS = frozenset(
    {
        "sasl.password",
        "sasl.jaas.config",
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.truststore.password",
        "ssl.keystore.key",
    }
)

# Keys Java accepts that only tune JVM-side machinery (metrics, JMX, DNS policy). Accepted so
# that configs shared with Java clients work unchanged; they have no effect here.
_ACCEPTED_NO_EFFECT = frozenset(
    {
        "metrics.sample.window.ms",
        "metrics.num.samples",
        "metrics.recording.level",
        "metric.reporters",
        "auto.include.jmx.reporter",
        "enable.metrics.push",
        "client.dns.lookup",
        "partitioner.availability.timeout.ms",
        "partitioner.adaptive.partitioning.enable",
    }
)

# JVM security plumbing: the value Java uses by default describes what OpenSSL does here and is
# accepted; any other value would be a setting this client cannot honour, so it is refused.
_JVM_SECURITY_KEYS: dict[str, tuple[frozenset[str], str]] = {
    "ssl.keymanager.algorithm": (
        frozenset({"sunx509"}),
        "OpenSSL loads the client key; only Java's default SunX509 is accepted",
    ),
    "ssl.trustmanager.algorithm": (
        frozenset({"pkix"}),
        "OpenSSL verifies certificates with PKIX rules; only Java's default PKIX is accepted",
    ),
    "ssl.secure.random.implementation": (
        frozenset(),
        "OpenSSL's own random generator is used; remove the key",
    ),
    "ssl.engine.factory.class": (frozenset(), "Java SSL engine factories cannot be loaded"),
    "ssl.provider": (frozenset(), "Java security providers cannot be loaded"),
    "security.providers": (frozenset(), "Java security providers cannot be loaded"),
}

_COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")
_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def _parse_int(key: str, raw: object, lo: int, hi: int) -> int:
    if isinstance(raw, bool):
        raise ConfigError(f"{key}: expected an integer, got a boolean")
    if isinstance(raw, int):
        value = raw
    elif isinstance(raw, str):
        try:
            value = int(raw.strip())
        except ValueError:
            raise ConfigError(f"{key}: expected an integer, got {raw!r}") from None
    else:
        raise ConfigError(f"{key}: expected an integer, got {type(raw).__name__}")
    if not lo <= value <= hi:
        raise ConfigError(f"{key}: {value} is out of range [{lo}, {hi}]")
    return value


def _parse_bool(key: str, raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise ConfigError(f"{key}: expected true or false, got {raw!r}")


def _parse_str(key: str, raw: object) -> str:
    if isinstance(raw, str):
        return raw.strip()
    raise ConfigError(f"{key}: expected a string, got {type(raw).__name__}")


def _parse_list(key: str, raw: object) -> tuple[str, ...]:
    if isinstance(raw, str):
        items = [s.strip() for s in raw.split(",")]
    elif isinstance(raw, list | tuple):
        items = [_parse_str(key, s) for s in raw]
    else:
        raise ConfigError(f"{key}: expected a comma-separated string or a list")
    return tuple(s for s in items if s)


def _parse_acks(key: str, raw: object) -> int:
    text = str(raw).strip().lower() if not isinstance(raw, bool) else ""
    if text == "all":
        return -1
    if text in ("-1", "0", "1"):
        return int(text)
    raise ConfigError(f"{key}: expected one of all, -1, 0, 1; got {raw!r}")


def parse_jaas_config(value: str) -> tuple[str, str, str]:
    """Parse a PLAIN or SCRAM ``sasl.jaas.config`` into (module kind, username, password).

    The syntax is Java's (:func:`kafka_sink.net.jaas.parse_jaas`). Errors never quote the value
    (it holds the password).
    """
    entry = parse_jaas(value)
    module = entry.login_module
    if module.endswith("PlainLoginModule"):
        kind = "PLAIN"
    elif module.endswith("ScramLoginModule"):
        kind = "SCRAM"
    else:
        raise ConfigError(
            "sasl.jaas.config: only PlainLoginModule and ScramLoginModule are supported"
        )
    if kind == "SCRAM" and entry.options.get("tokenauth", "false").lower() == "true":
        raise ConfigError(
            "sasl.jaas.config: tokenauth=true (delegation-token SCRAM) is not supported"
        )
    if "username" not in entry.options or "password" not in entry.options:
        raise ConfigError("sasl.jaas.config: username and password are both required")
    return kind, entry.options["username"], entry.options["password"]


@dataclass(frozen=True)
class _Key:
    default: object
    parse: Callable[[str, object], object]
    attr: str


def _int(lo: int = 0, hi: int = MAX_INT) -> Callable[[str, object], object]:
    return lambda k, v: _parse_int(k, v, lo, hi)


def _choice(*options: str, upper: bool = False) -> Callable[[str, object], object]:
    def parse(key: str, raw: object) -> object:
        text = _parse_str(key, raw)
        text = text.upper() if upper else text.lower()
        if text not in options:
            raise ConfigError(f"{key}: expected one of {', '.join(options)}; got {raw!r}")
        return text

    return parse


def _opt_str(key: str, raw: object) -> object:
    return None if raw is None else _parse_str(key, raw) or None


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


_KEYS: dict[str, _Key] = {
    "bootstrap.servers": _Key((), _parse_list, "bootstrap_servers"),
    "client.id": _Key("", _parse_str, "client_id"),
    "acks": _Key(-1, _parse_acks, "acks"),
    "linger.ms": _Key(5, _int(), "linger_ms"),
    "batch.size": _Key(16384, _int(), "batch_size"),
    "buffer.memory": _Key(33554432, _int(0, MAX_LONG), "buffer_memory"),
    "max.block.ms": _Key(60000, _int(0, MAX_LONG), "max_block_ms"),
    "compression.type": _Key("none", _choice(*_COMPRESSION_TYPES), "compression_type"),
    "compression.gzip.level": _Key(-1, _int(-1, 9), "compression_gzip_level"),
    "compression.lz4.level": _Key(9, _int(1, 17), "compression_lz4_level"),
    "compression.zstd.level": _Key(3, _int(-131072, 22), "compression_zstd_level"),
    "enable.idempotence": _Key(True, _parse_bool, "enable_idempotence"),
    "delivery.timeout.ms": _Key(120000, _int(), "delivery_timeout_ms"),
    "request.timeout.ms": _Key(30000, _int(), "request_timeout_ms"),
    "retries": _Key(MAX_INT, _int(), "retries"),
    "retry.backoff.ms": _Key(100, _int(0, MAX_LONG), "retry_backoff_ms"),
    "retry.backoff.max.ms": _Key(1000, _int(0, MAX_LONG), "retry_backoff_max_ms"),
    "max.in.flight.requests.per.connection": _Key(5, _int(1), "max_in_flight"),
    "max.request.size": _Key(1048576, _int(1), "max_request_size"),
    "metadata.max.age.ms": _Key(300000, _int(0, MAX_LONG), "metadata_max_age_ms"),
    "metadata.max.idle.ms": _Key(300000, _int(5000, MAX_LONG), "metadata_max_idle_ms"),
    "reconnect.backoff.ms": _Key(50, _int(0, MAX_LONG), "reconnect_backoff_ms"),
    "reconnect.backoff.max.ms": _Key(1000, _int(0, MAX_LONG), "reconnect_backoff_max_ms"),
    "socket.connection.setup.timeout.ms": _Key(
        10000, _int(0, MAX_LONG), "socket_connection_setup_timeout_ms"
    ),
    "socket.connection.setup.timeout.max.ms": _Key(
        30000, _int(0, MAX_LONG), "socket_connection_setup_timeout_max_ms"
    ),
    "connections.max.idle.ms": _Key(540000, _int(-1, MAX_LONG), "connections_max_idle_ms"),
    "send.buffer.bytes": _Key(131072, _int(-1), "send_buffer_bytes"),
    "receive.buffer.bytes": _Key(32768, _int(-1), "receive_buffer_bytes"),
    "partitioner.ignore.keys": _Key(False, _parse_bool, "partitioner_ignore_keys"),
    "key.serializer": _Key(None, _parse_plugin, "key_serializer"),
    "value.serializer": _Key(None, _parse_plugin, "value_serializer"),
    "partitioner.class": _Key(None, _parse_plugin, "partitioner_class"),
    INTERCEPTORS_KEY: _Key((), _parse_plugins, "interceptor_classes"),
    "transactional.id": _Key(None, _opt_str, "transactional_id"),
    "transaction.timeout.ms": _Key(60000, _int(1), "transaction_timeout_ms"),
    "security.protocol": _Key(
        "PLAINTEXT", _choice(*_SECURITY_PROTOCOLS, upper=True), "security_protocol"
    ),
    "sasl.mechanism": _Key("GSSAPI", lambda k, v: _parse_str(k, v).upper(), "sasl_mechanism"),
    "sasl.username": _Key(None, _opt_str, "sasl_username"),
    "sasl.password": _Key(None, _opt_str, "sasl_password"),
    "sasl.jaas.config": _Key(None, _opt_str, "sasl_jaas_config"),
    "ssl.truststore.location": _Key(None, _opt_str, "ssl_truststore_location"),
    "ssl.truststore.type": _Key(
        "PEM", lambda k, v: _parse_str(k, v).upper(), "ssl_truststore_type"
    ),
    "ssl.truststore.certificates": _Key(None, _opt_str, "ssl_truststore_certificates"),
    "ssl.truststore.password": _Key(None, _opt_str, "ssl_truststore_password"),
    "ssl.keystore.location": _Key(None, _opt_str, "ssl_keystore_location"),
    "ssl.keystore.type": _Key("PEM", lambda k, v: _parse_str(k, v).upper(), "ssl_keystore_type"),
    "ssl.keystore.certificate.chain": _Key(None, _opt_str, "ssl_keystore_certificate_chain"),
    "ssl.keystore.key": _Key(None, _opt_str, "ssl_keystore_key"),
    "ssl.keystore.password": _Key(None, _opt_str, "ssl_keystore_password"),
    "ssl.key.password": _Key(None, _opt_str, "ssl_key_password"),
    "ssl.endpoint.identification.algorithm": _Key(
        "https", lambda k, v: _parse_str(k, v).lower(), "ssl_endpoint_identification_algorithm"
    ),
    "ssl.protocol": _Key("TLSv1.3", _parse_str, "ssl_protocol"),
    "ssl.enabled.protocols": _Key(("TLSv1.2", "TLSv1.3"), _parse_list, "ssl_enabled_protocols"),
    "ssl.cipher.suites": _Key((), _parse_list, "ssl_cipher_suites"),
}


def _check_jvm_security_key(key: str, raw: object) -> None:
    accepted, why = _JVM_SECURITY_KEYS[key]
    text = "" if raw is None else _parse_str(key, raw)
    if text and text.lower() not in accepted:
        raise ConfigError(f"{key}: {text!r} is not supported: {why}")


@dataclass(frozen=True)
class ProducerConfig:
    """Validated producer settings; build with :meth:`from_mapping`."""

    bootstrap_servers: tuple[str, ...]
    client_id: str
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
    request_timeout_ms: int
    retries: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int
    max_in_flight: int
    max_request_size: int
    metadata_max_age_ms: int
    metadata_max_idle_ms: int
    reconnect_backoff_ms: int
    reconnect_backoff_max_ms: int
    socket_connection_setup_timeout_ms: int
    socket_connection_setup_timeout_max_ms: int
    connections_max_idle_ms: int
    send_buffer_bytes: int
    receive_buffer_bytes: int
    partitioner_ignore_keys: bool
    #: Plugins: an import path (str) or the object as given; see ``producer.plugins``.
    key_serializer: object
    value_serializer: object
    partitioner_class: object
    interceptor_classes: tuple[object, ...]
    transactional_id: str | None
    transaction_timeout_ms: int
    security_protocol: str
    sasl_mechanism: str
    sasl_username: str | None = field(repr=False)
    sasl_password: str | None = field(repr=False)
    sasl_jaas_config: str | None = field(repr=False)
    ssl_truststore_location: str | None
    ssl_truststore_type: str
    ssl_truststore_certificates: str | None = field(repr=False)
    ssl_truststore_password: str | None = field(repr=False)
    ssl_keystore_location: str | None
    ssl_keystore_type: str
    ssl_keystore_certificate_chain: str | None = field(repr=False)
    ssl_keystore_key: str | None = field(repr=False)
    ssl_keystore_password: str | None = field(repr=False)
    ssl_key_password: str | None = field(repr=False)
    ssl_endpoint_identification_algorithm: str
    ssl_protocol: str
    ssl_enabled_protocols: tuple[str, ...]
    ssl_cipher_suites: tuple[str, ...]
    explicitly_set: frozenset[str] = frozenset()

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

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def uses_ssl(self) -> bool:
        return self.security_protocol.endswith("SSL")

    def tls_config(self) -> TlsConfig | None:
        """The ``ssl.*`` settings for the network layer (None unless the protocol uses TLS)."""
        return _tls_config(self.__dict__) if self.uses_ssl else None

    @classmethod
    def from_mapping(cls, config: Mapping[str, object]) -> ProducerConfig:
        values: dict[str, Any] = {spec.attr: spec.default for spec in _KEYS.values()}
        explicit: set[str] = set()
        for raw_key, raw in config.items():
            if not isinstance(raw_key, str):
                raise ConfigError(f"config keys must be strings, got {raw_key!r}")
            key = raw_key.strip()
            if key in _ACCEPTED_NO_EFFECT:
                continue
            if key in _JVM_SECURITY_KEYS:
                _check_jvm_security_key(key, raw)
                continue
            spec = _KEYS.get(key)
            if spec is None:
                raise ConfigError(f"{key}: unknown producer config key")
            if raw is None and spec.default is not None:
                raise ConfigError(f"{key}: a value is required (got None)")
            try:
                values[spec.attr] = spec.parse(key, raw)
            except ConfigError as exc:
                if key in SECRET_KEYS:
                    raise ConfigError(f"{key}: invalid value (not shown: secret)") from None
                raise exc from None
            explicit.add(key)
        values["explicitly_set"] = frozenset(explicit)
        _validate(values, explicit)
        return cls(**values)

    def __repr__(self) -> str:
        shown = []
        for f in fields(self):
            if not f.repr or f.name == "explicitly_set":
                continue
            value = getattr(self, f.name)
            if f.name in _PLUGIN_ATTRS and value is not None:
                value = (
                    [describe(v) for v in value]
                    if f.name == "interceptor_classes"
                    else (describe(value))
                )
            shown.append(f"{f.name}={value!r}")
        secrets = [k for k in sorted(SECRET_KEYS) if getattr(self, _KEYS[k].attr, None) is not None]
        if secrets:
            shown.append(f"secrets_set={secrets!r}")
        return f"ProducerConfig({', '.join(shown)})"


_PLUGIN_ATTRS = frozenset(
    {"key_serializer", "value_serializer", "partitioner_class", "interceptor_classes"}
)


def _validate(v: dict[str, Any], explicit: set[str]) -> None:
    if not v["bootstrap_servers"]:
        raise ConfigError("bootstrap.servers: required (a comma-separated list of host:port)")
    for server in v["bootstrap_servers"]:
        host, sep, port = server.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"bootstrap.servers: {server!r} is not host:port")

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

    v["retry_backoff_ms"] = min(v["retry_backoff_ms"], v["retry_backoff_max_ms"])
    v["reconnect_backoff_ms"] = min(v["reconnect_backoff_ms"], v["reconnect_backoff_max_ms"])

    # Security.
    protocol = v["security_protocol"]
    if protocol.startswith("SASL_"):
        if v["sasl_jaas_config"] is not None:
            kind, user, password = parse_jaas_config(v["sasl_jaas_config"])
            mech = v["sasl_mechanism"]
            if kind == "PLAIN" and mech != "PLAIN":
                raise ConfigError(
                    f"sasl.jaas.config: PlainLoginModule needs sasl.mechanism=PLAIN, got {mech}"
                )
            if kind == "SCRAM" and not mech.startswith("SCRAM-"):
                raise ConfigError(
                    "sasl.jaas.config: ScramLoginModule needs sasl.mechanism=SCRAM-SHA-256 "
                    f"or SCRAM-SHA-512, got {mech}"
                )
            if v["sasl_username"] is None:
                v["sasl_username"] = user
            if v["sasl_password"] is None:
                v["sasl_password"] = password
        if v["sasl_mechanism"] not in _SASL_MECHANISMS:
            raise ConfigError(
                f"sasl.mechanism: {v['sasl_mechanism']} is not supported with "
                f"security.protocol={protocol}; use one of {', '.join(_SASL_MECHANISMS)}"
            )
        if v["sasl_username"] is None or v["sasl_password"] is None:
            raise ConfigError(
                "sasl.username: SASL needs a username and a password "
                "(sasl.username + sasl.password, or sasl.jaas.config)"
            )
    # A security key the chosen protocol does not use would be accepted and ignored: refuse it.
    if not protocol.endswith("SSL"):
        unused = sorted(k for k in explicit if k.startswith("ssl."))
        if unused:
            raise ConfigError(
                f"{unused[0]}: set, but security.protocol={protocol} uses no TLS; use "
                "security.protocol=SSL or SASL_SSL, or remove the ssl.* keys"
            )
    if not protocol.startswith("SASL_"):
        unused = sorted(k for k in explicit if k.startswith("sasl."))
        if unused:
            raise ConfigError(
                f"{unused[0]}: set, but security.protocol={protocol} uses no SASL; use "
                "security.protocol=SASL_PLAINTEXT or SASL_SSL, or remove the sasl.* keys"
            )
    if protocol.endswith("SSL"):
        _tls_config(v)  # every ssl.* value is checked here, before any connection


def _tls_config(v: Mapping[str, Any]) -> TlsConfig:
    return TlsConfig(
        truststore_type=v["ssl_truststore_type"],
        truststore_location=v["ssl_truststore_location"],
        truststore_certificates=v["ssl_truststore_certificates"],
        truststore_password=v["ssl_truststore_password"],
        keystore_type=v["ssl_keystore_type"],
        keystore_location=v["ssl_keystore_location"],
        keystore_key=v["ssl_keystore_key"],
        keystore_certificate_chain=v["ssl_keystore_certificate_chain"],
        keystore_password=v["ssl_keystore_password"],
        key_password=v["ssl_key_password"],
        endpoint_identification_algorithm=v["ssl_endpoint_identification_algorithm"],
        protocol=v["ssl_protocol"],
        enabled_protocols=v["ssl_enabled_protocols"],
        cipher_suites=v["ssl_cipher_suites"],
    )
