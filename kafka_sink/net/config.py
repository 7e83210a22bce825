"""Client settings: the keys every Kafka client shares, and the network client's settings.

Role: :class:`ClientConfig` is Java's ``CommonClientConfigs``: the dotted keys any client of a
cluster understands (``bootstrap.servers``, ``client.id``, ``security.protocol`` with the
``ssl.*`` and ``sasl.*`` keys, the request, retry, reconnect and connection-setup timings, the
socket buffers, ``metadata.max.age.ms``), parsed from a mapping of Kafka's dotted keys (values
may be strings: Spark passes every option as one). It is the base of the producer's
``ProducerConfig`` and of the admin client's config, which add their own keys to its table, so
a shared key means the same thing and is refused with the same words in every client.
:meth:`ClientConfig.network_config` turns it into :class:`NetworkConfig`, the typed settings the
:class:`~kafka_sink.net.network_client.NetworkClient` runs on.

Invariants:
- An unknown key, a value of the wrong type or out of range, or a cross-field conflict raises
  :class:`~kafka_sink.errors.ConfigError` naming the key, at construction, never later. A config
  that reads another client's mapping (``_OTHER_KEYS_IGNORED``) skips the keys it does not know,
  except ``ssl.*``, ``sasl.*`` and ``security.*`` keys: every key of those families is a shared
  key, so an unknown one is a mistake in a security setting and is refused.
- Secrets (``sasl.password``, ``sasl.jaas.config``, ``ssl.*password``, ``ssl.keystore.key``,
  the PEM material) never appear in ``repr()`` or in error messages; other values are quoted
  capped (``shown_value``), so a message never grows with the value.
- Integer values given as text are read as Kafka's ``ConfigDef`` reads them
  (``Integer.parseInt``/``Long.parseLong`` of ``trim()``): an optional sign and decimal digits
  of any script, surrounded only by characters up to U+0020; ``1_000`` or a no-break space is
  refused, as in Java.
- No security setting is accepted and ignored: every ``ssl.*`` key is applied by
  :class:`~kafka_sink.net.tls.TlsConfig` (checked at construction) or refused; ``ssl.*`` keys
  without TLS and ``sasl.*`` keys without SASL are refused; ``sasl.jaas.config`` with
  ``sasl.username`` or ``sasl.password`` is refused (the credentials come from one of them);
  the JVM-only security keys are accepted only with Java's default value, which describes what
  OpenSSL does anyway. The OAUTHBEARER keys (the token source's ``sasl.oauthbearer.*`` and
  ``sasl.login.*`` keys and the login's refresh keys) are accepted only with
  ``sasl.mechanism=OAUTHBEARER``, which takes no ``sasl.username``/``sasl.password``; with it,
  the token source is built and the refresh settings read at construction, so a bad key fails
  there (no token is fetched then).
- ``retry.backoff.ms`` and ``reconnect.backoff.ms`` never exceed their ``.max`` settings (they
  are lowered to them, as Java does).
- A ``NetworkConfig`` that constructs without error names a supported security protocol, for
  SASL_* a mechanism, and for *SSL TLS settings that ``TlsConfig`` accepted (files are read only
  when the context is built).
"""

from __future__ import annotations

import re
import ssl
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Self

from kafka_sink.errors import ConfigError
from kafka_sink.net.jaas import parse_jaas
from kafka_sink.net.oauth.login import RefreshTimings, acquire_login, oauth_keys, source_for
from kafka_sink.net.sasl import SaslConfig
from kafka_sink.net.tls import TlsConfig
from kafka_sink.net.user_info import shown_value

__all__ = [
    "ACCEPTED_NO_EFFECT",
    "CLIENT_KEYS",
    "MAX_INT",
    "MAX_LONG",
    "SECRET_KEYS",
    "ClientConfig",
    "ConfigKey",
    "NetworkConfig",
    "choice",
    "int_in",
    "opt_str",
    "parse_bool",
    "parse_bootstrap_servers",
    "parse_int",
    "parse_jaas_config",
    "parse_list",
    "parse_str",
]

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
ACCEPTED_NO_EFFECT = frozenset(
    {
        "metrics.sample.window.ms",
        "metrics.num.samples",
        "metrics.recording.level",
        "metric.reporters",
        "auto.include.jmx.reporter",
        "enable.metrics.push",
        "client.dns.lookup",
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

# Every key of these families is a shared key (or a JVM one above): see the module invariants.
_SECURITY_PREFIXES = ("ssl.", "sasl.", "security.")

_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


# -- parsing one value ----------------------------------------------------------------------------


# Java's String.trim(): every character up to U+0020, nothing else (no NBSP, no U+2003).
_JAVA_TRIM = "".join(chr(c) for c in range(0x21))
# Integer.parseInt / Long.parseLong: an optional sign, then decimal digits of any script (Java's
# Character.digit reads every Unicode Nd digit, as ``\d`` matches here); no '_', no spaces.
_JAVA_INTEGER = re.compile(r"[+-]?\d+")
# More significant digits than any long has: out of range without building the number.
_LONG_DIGITS = 19
_BEYOND_LONG: int = 10**_LONG_DIGITS


def java_integer(text: str) -> int | None:
    """``text`` read as Kafka's ``ConfigDef`` reads an INT or LONG (``parseInt(trim())``); None
    when Java would throw ``NumberFormatException``. Huge values come back huge but are never
    built digit by digit beyond what any range check needs."""
    trimmed = text.strip(_JAVA_TRIM)
    if not _JAVA_INTEGER.fullmatch(trimmed):
        return None
    negative = trimmed[0] == "-"
    digits = "".join(str(unicodedata.decimal(c)) for c in trimmed.lstrip("+-")).lstrip("0")
    if len(digits) > _LONG_DIGITS:
        return -_BEYOND_LONG if negative else _BEYOND_LONG
    value = int(digits or "0")
    return -value if negative else value


def parse_int(key: str, raw: object, lo: int, hi: int) -> int:
    if isinstance(raw, bool):
        raise ConfigError(f"{key}: expected an integer, got a boolean")
    if isinstance(raw, int):
        value = raw
    elif isinstance(raw, str):
        parsed = java_integer(raw)
        if parsed is None:
            raise ConfigError(
                f"{key}: expected an integer (an optional sign and decimal digits, as Java's "
                f"Integer.parseInt reads), got {shown_value(raw)}"
            )
        value = parsed
    else:
        raise ConfigError(f"{key}: expected an integer, got {type(raw).__name__}")
    if not lo <= value <= hi:
        shown = value if abs(value) < _BEYOND_LONG else "a number beyond Java's long range"
        raise ConfigError(f"{key}: {shown} is out of range [{lo}, {hi}]")
    return value


def parse_bool(key: str, raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    shown = shown_value(raw) if isinstance(raw, str) else type(raw).__name__
    raise ConfigError(f"{key}: expected true or false, got {shown}")


def parse_str(key: str, raw: object) -> str:
    if isinstance(raw, str):
        return raw.strip()
    raise ConfigError(f"{key}: expected a string, got {type(raw).__name__}")


def parse_list(key: str, raw: object) -> tuple[str, ...]:
    if isinstance(raw, str):
        items = [s.strip() for s in raw.split(",")]
    elif isinstance(raw, list | tuple):
        items = [parse_str(key, s) for s in raw]
    else:
        raise ConfigError(f"{key}: expected a comma-separated string or a list")
    return tuple(s for s in items if s)


def int_in(lo: int = 0, hi: int = MAX_INT) -> Callable[[str, object], object]:
    """The parser of an integer key whose value must lie in ``[lo, hi]``."""
    return lambda k, v: parse_int(k, v, lo, hi)


def choice(*options: str, upper: bool = False) -> Callable[[str, object], object]:
    """The parser of a key that takes one of ``options`` (case-insensitive)."""

    def parse(key: str, raw: object) -> object:
        text = parse_str(key, raw)
        text = text.upper() if upper else text.lower()
        if text not in options:
            shown = shown_value(raw) if isinstance(raw, str) else repr(raw)
            raise ConfigError(f"{key}: expected one of {', '.join(options)}; got {shown}")
        return text

    return parse


def opt_str(key: str, raw: object) -> object:
    """A string, or None when absent or empty."""
    return None if raw is None else parse_str(key, raw) or None


def _upper(key: str, raw: object) -> object:
    return parse_str(key, raw).upper()


def _lower(key: str, raw: object) -> object:
    return parse_str(key, raw).lower()


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
class ConfigKey:
    """One dotted key: its Java default, its parser and the attribute it fills."""

    default: object
    parse: Callable[[str, object], object]
    attr: str


CLIENT_KEYS: dict[str, ConfigKey] = {
    "bootstrap.servers": ConfigKey((), parse_list, "bootstrap_servers"),
    "client.id": ConfigKey("", parse_str, "client_id"),
    "request.timeout.ms": ConfigKey(30000, int_in(), "request_timeout_ms"),
    "retry.backoff.ms": ConfigKey(100, int_in(0, MAX_LONG), "retry_backoff_ms"),
    "retry.backoff.max.ms": ConfigKey(1000, int_in(0, MAX_LONG), "retry_backoff_max_ms"),
    "metadata.max.age.ms": ConfigKey(300000, int_in(0, MAX_LONG), "metadata_max_age_ms"),
    "reconnect.backoff.ms": ConfigKey(50, int_in(0, MAX_LONG), "reconnect_backoff_ms"),
    "reconnect.backoff.max.ms": ConfigKey(1000, int_in(0, MAX_LONG), "reconnect_backoff_max_ms"),
    "socket.connection.setup.timeout.ms": ConfigKey(
        10000, int_in(0, MAX_LONG), "socket_connection_setup_timeout_ms"
    ),
    "socket.connection.setup.timeout.max.ms": ConfigKey(
        30000, int_in(0, MAX_LONG), "socket_connection_setup_timeout_max_ms"
    ),
    "connections.max.idle.ms": ConfigKey(540000, int_in(-1, MAX_LONG), "connections_max_idle_ms"),
    "send.buffer.bytes": ConfigKey(131072, int_in(-1), "send_buffer_bytes"),
    "receive.buffer.bytes": ConfigKey(32768, int_in(-1), "receive_buffer_bytes"),
    "security.protocol": ConfigKey(
        "PLAINTEXT", choice(*_SECURITY_PROTOCOLS, upper=True), "security_protocol"
    ),
    "sasl.mechanism": ConfigKey("GSSAPI", _upper, "sasl_mechanism"),
    "sasl.username": ConfigKey(None, opt_str, "sasl_username"),
    "sasl.password": ConfigKey(None, opt_str, "sasl_password"),
    "sasl.jaas.config": ConfigKey(None, opt_str, "sasl_jaas_config"),
    "ssl.truststore.location": ConfigKey(None, opt_str, "ssl_truststore_location"),
    "ssl.truststore.type": ConfigKey("PEM", _upper, "ssl_truststore_type"),
    "ssl.truststore.certificates": ConfigKey(None, opt_str, "ssl_truststore_certificates"),
    "ssl.truststore.password": ConfigKey(None, opt_str, "ssl_truststore_password"),
    "ssl.keystore.location": ConfigKey(None, opt_str, "ssl_keystore_location"),
    "ssl.keystore.type": ConfigKey("PEM", _upper, "ssl_keystore_type"),
    "ssl.keystore.certificate.chain": ConfigKey(None, opt_str, "ssl_keystore_certificate_chain"),
    "ssl.keystore.key": ConfigKey(None, opt_str, "ssl_keystore_key"),
    "ssl.keystore.password": ConfigKey(None, opt_str, "ssl_keystore_password"),
    "ssl.key.password": ConfigKey(None, opt_str, "ssl_key_password"),
    "ssl.endpoint.identification.algorithm": ConfigKey(
        "https", _lower, "ssl_endpoint_identification_algorithm"
    ),
    "ssl.protocol": ConfigKey("TLSv1.3", parse_str, "ssl_protocol"),
    "ssl.enabled.protocols": ConfigKey(("TLSv1.2", "TLSv1.3"), parse_list, "ssl_enabled_protocols"),
    "ssl.cipher.suites": ConfigKey((), parse_list, "ssl_cipher_suites"),
}


def _check_jvm_security_key(key: str, raw: object) -> None:
    accepted, why = _JVM_SECURITY_KEYS[key]
    text = "" if raw is None else parse_str(key, raw)
    if text and text.lower() not in accepted:
        raise ConfigError(f"{key}: {shown_value(text)} is not supported: {why}")


class _SecurityProtocol:
    """What ``security.protocol`` implies, for the configs that carry it."""

    security_protocol: str

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def uses_ssl(self) -> bool:
        return self.security_protocol.endswith("SSL")


@dataclass(frozen=True, kw_only=True, repr=False)
class ClientConfig(_SecurityProtocol):
    """Validated settings every client shares; build with :meth:`from_mapping`.

    A client with keys of its own subclasses it, decorated as this class is (``kw_only`` lets
    its fields follow these; ``repr=False`` keeps the secret-free ``__repr__`` below), extends
    ``_KEYS`` and, if it has cross-field rules, ``_validate_own``.
    """

    #: The keys this class parses: Kafka's dotted name -> default, parser, attribute.
    _KEYS: ClassVar[Mapping[str, ConfigKey]] = CLIENT_KEYS
    #: Keys accepted and ignored (JVM-only tuning).
    _NO_EFFECT: ClassVar[frozenset[str]] = ACCEPTED_NO_EFFECT
    #: Which client's key an unknown key is not (for the error message).
    _KIND: ClassVar[str] = "client"
    #: True for a config read from another client's mapping: keys of that client are skipped.
    _OTHER_KEYS_IGNORED: ClassVar[bool] = False

    bootstrap_servers: tuple[str, ...]
    client_id: str
    request_timeout_ms: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int
    metadata_max_age_ms: int
    reconnect_backoff_ms: int
    reconnect_backoff_max_ms: int
    socket_connection_setup_timeout_ms: int
    socket_connection_setup_timeout_max_ms: int
    connections_max_idle_ms: int
    send_buffer_bytes: int
    receive_buffer_bytes: int
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
    #: The dotted keys the mapping set (the rules that depend on a choice being explicit).
    explicitly_set: frozenset[str] = frozenset()
    #: The OAUTHBEARER settings as given (``sasl.oauthbearer.*``, ``sasl.login.*`` and, with
    #: OAUTHBEARER, ``sasl.jaas.config``): what the token source and the login read.
    sasl_oauthbearer: Mapping[str, object] = field(default_factory=dict, repr=False)

    def tls_config(self) -> TlsConfig | None:
        """The ``ssl.*`` settings for the network layer (None unless the protocol uses TLS)."""
        return _tls_config(self.__dict__) if self.uses_ssl else None

    def network_config(
        self,
        client_id: str,
        *,
        max_in_flight: int = 5,
        allow_auto_topic_creation: bool = False,
    ) -> NetworkConfig:
        """The network client's settings. ``client_id`` is the one to send (the client may
        have made one up when ``client.id`` is empty); the other two are per-client choices
        (Java's producer takes ``max.in.flight.requests.per.connection`` from its config and
        lets brokers auto-create the topics it asks about)."""
        return NetworkConfig(
            bootstrap_servers=list(self.bootstrap_servers),
            client_id=client_id,
            request_timeout_ms=self.request_timeout_ms,
            reconnect_backoff_ms=self.reconnect_backoff_ms,
            reconnect_backoff_max_ms=self.reconnect_backoff_max_ms,
            max_in_flight=max_in_flight,
            send_buffer_bytes=self.send_buffer_bytes,
            receive_buffer_bytes=self.receive_buffer_bytes,
            connections_max_idle_ms=self.connections_max_idle_ms,
            socket_connection_setup_timeout_ms=self.socket_connection_setup_timeout_ms,
            socket_connection_setup_timeout_max_ms=self.socket_connection_setup_timeout_max_ms,
            security_protocol=self.security_protocol,
            sasl_mechanism=self.sasl_mechanism if self.uses_sasl else None,
            sasl_oauthbearer=dict(self.sasl_oauthbearer) if self.uses_sasl else None,
            sasl_username=self.sasl_username,
            sasl_password=self.sasl_password,
            tls=self.tls_config(),
            metadata_max_age_ms=self.metadata_max_age_ms,
            retry_backoff_ms=self.retry_backoff_ms,
            retry_backoff_max_ms=self.retry_backoff_max_ms,
            allow_auto_topic_creation=allow_auto_topic_creation,
        )

    @classmethod
    def accepted_keys(cls) -> frozenset[str]:
        """Every key :meth:`from_mapping` accepts (some only with their default value, the
        OAUTHBEARER ones only with that mechanism)."""
        return frozenset(cls._KEYS) | cls._NO_EFFECT | frozenset(_JVM_SECURITY_KEYS) | oauth_keys()

    @classmethod
    def from_mapping(cls, config: Mapping[str, object]) -> Self:
        values: dict[str, Any] = {spec.attr: spec.default for spec in cls._KEYS.values()}
        explicit: set[str] = set()
        oauth: dict[str, object] = {}
        oauth_accepted = oauth_keys()
        for raw_key, raw in config.items():
            if not isinstance(raw_key, str):
                raise ConfigError(f"config keys must be strings, got {raw_key!r}")
            key = raw_key.strip()
            if key in cls._NO_EFFECT:
                continue
            if key in oauth_accepted:
                # Read by the token source and the login (checked in _check_shared), kept as
                # given: a provider may be a Python object.
                oauth[key] = raw
                explicit.add(key)
                continue
            if key in _JVM_SECURITY_KEYS:
                _check_jvm_security_key(key, raw)
                continue
            spec = cls._KEYS.get(key)
            if spec is None:
                if cls._OTHER_KEYS_IGNORED and not key.startswith(_SECURITY_PREFIXES):
                    continue
                raise ConfigError(f"{key}: unknown {cls._KIND} config key")
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
        values["sasl_oauthbearer"] = oauth
        _check_bootstrap(values)
        cls._validate_own(values, explicit)
        _check_shared(values, explicit)
        return cls(**values)

    @classmethod
    def _validate_own(cls, values: dict[str, Any], explicit: set[str]) -> None:
        """A subclass's cross-field rules over the parsed ``values`` (which it may adjust).

        They run after ``bootstrap.servers`` is checked and before the timings and security
        keys are, so that when several keys are wrong the one named is the same in every
        client.
        """

    def _shown(self, name: str, value: object) -> object:
        """How ``repr()`` shows attribute ``name`` (a subclass may describe objects)."""
        return value

    def __repr__(self) -> str:
        shown = [
            f"{f.name}={self._shown(f.name, getattr(self, f.name))!r}"
            for f in fields(self)
            if f.repr and f.name != "explicitly_set"
        ]
        secrets = [
            k for k in sorted(SECRET_KEYS) if getattr(self, CLIENT_KEYS[k].attr, None) is not None
        ]
        if secrets:
            shown.append(f"secrets_set={secrets!r}")
        if self.sasl_oauthbearer:
            # Names only: client secrets, assertions and provider objects are not shown.
            shown.append(f"oauthbearer_keys_set={sorted(self.sasl_oauthbearer)!r}")
        return f"{type(self).__name__}({', '.join(shown)})"


def _check_bootstrap(v: Mapping[str, Any]) -> None:
    if not v["bootstrap_servers"]:
        raise ConfigError("bootstrap.servers: required (a comma-separated list of host:port)")
    for server in v["bootstrap_servers"]:
        host, sep, port = server.rpartition(":")
        if not sep or not host or not _is_port(port):
            raise ConfigError(f"bootstrap.servers: {shown_value(server)} is not host:port")


def _is_port(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 5 and 0 < int(text) < 65536


def _check_shared(v: dict[str, Any], explicit: set[str]) -> None:
    v["retry_backoff_ms"] = min(v["retry_backoff_ms"], v["retry_backoff_max_ms"])
    v["reconnect_backoff_ms"] = min(v["reconnect_backoff_ms"], v["reconnect_backoff_max_ms"])

    protocol = v["security_protocol"]
    oauth_set = sorted(v["sasl_oauthbearer"])
    if protocol.startswith("SASL_") and v["sasl_mechanism"] == "OAUTHBEARER":
        _check_oauthbearer(v, explicit)
    elif protocol.startswith("SASL_"):
        if oauth_set:
            raise ConfigError(
                f"{oauth_set[0]}: set, but sasl.mechanism={v['sasl_mechanism']}; it applies "
                "to sasl.mechanism=OAUTHBEARER only (set that, or remove the key)"
            )
        if v["sasl_jaas_config"] is not None:
            both = sorted(k for k in ("sasl.username", "sasl.password") if k in explicit)
            if both:
                # Either source alone names the credentials; together the token sent would mix
                # one's user name with the other's password.
                raise ConfigError(
                    f"sasl.jaas.config and {' and '.join(both)} are both set: give the "
                    "credentials once, in sasl.jaas.config (as Java clients do) or in "
                    "sasl.username + sasl.password"
                )
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
            v["sasl_username"], v["sasl_password"] = user, password
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


def _check_oauthbearer(v: dict[str, Any], explicit: set[str]) -> None:
    """OAUTHBEARER: no user name or password; the token source the settings describe must build
    (every one of its keys applied or refused, here, before any connection)."""
    given = sorted(k for k in ("sasl.username", "sasl.password") if k in explicit)
    if given:
        raise ConfigError(
            f"{given[0]}: set, but sasl.mechanism=OAUTHBEARER sends a token, not a password; "
            "remove it and configure the token source (sasl.oauthbearer.*)"
        )
    settings = dict(v["sasl_oauthbearer"])
    if v["sasl_jaas_config"] is not None:
        settings["sasl.jaas.config"] = v["sasl_jaas_config"]
    v["sasl_oauthbearer"] = settings
    RefreshTimings.from_settings(settings)
    source_for(settings)


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


# -- the network client's settings ----------------------------------------------------------------


def parse_bootstrap_servers(
    servers: str | Sequence[str | tuple[str, int]],
) -> list[tuple[str, int]]:
    """``"h1:9092,h2:9092"`` or a sequence of ``"host:port"`` / ``(host, port)`` -> pairs."""
    items: Sequence[str | tuple[str, int]] = (
        [s for s in servers.split(",") if s.strip()] if isinstance(servers, str) else servers
    )
    out: list[tuple[str, int]] = []
    for item in items:
        if isinstance(item, tuple):
            host, port = item
        else:
            text = item.strip()
            host, sep, port_text = text.rpartition(":")
            if not sep or not host or not (port_text.isascii() and port_text.isdigit()):
                raise ConfigError(f"bootstrap.servers entry {shown_value(text)} is not host:port")
            if len(port_text) > 5:
                raise ConfigError(
                    f"bootstrap.servers entry {shown_value(text)} has an invalid port"
                )
            host, port = host.strip("[]"), int(port_text)
        if not 0 < int(port) < 65536:
            raise ConfigError(f"bootstrap.servers entry {host}:{port} has an invalid port")
        out.append((str(host), int(port)))
    if not out:
        raise ConfigError("bootstrap.servers is empty")
    return out


@dataclass
class NetworkConfig(_SecurityProtocol):
    """Network settings, built by :meth:`ClientConfig.network_config` (Kafka key per field)."""

    bootstrap_servers: Sequence[tuple[str, int]] | Sequence[str] | str  # bootstrap.servers
    client_id: str | None = None  # client.id
    request_timeout_ms: int = 30_000  # request.timeout.ms
    reconnect_backoff_ms: int = 50  # reconnect.backoff.ms
    reconnect_backoff_max_ms: int = 1_000  # reconnect.backoff.max.ms
    max_in_flight: int = 5  # max.in.flight.requests.per.connection
    send_buffer_bytes: int = 131_072  # send.buffer.bytes (-1: OS default)
    receive_buffer_bytes: int = 32_768  # receive.buffer.bytes (-1: OS default)
    connections_max_idle_ms: int = 540_000  # connections.max.idle.ms
    socket_connection_setup_timeout_ms: int = 10_000  # socket.connection.setup.timeout.ms
    socket_connection_setup_timeout_max_ms: int = 30_000  # ...setup.timeout.max.ms
    security_protocol: str = "PLAINTEXT"  # security.protocol
    sasl_mechanism: str | None = None  # sasl.mechanism (None unless SASL_*)
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    # OAUTHBEARER: the settings of the token source and the login (None unless SASL_*).
    sasl_oauthbearer: Mapping[str, object] | None = field(default=None, repr=False)
    tls: TlsConfig | None = None  # the ssl.* keys (None with *SSL: system CAs, Java defaults)
    max_frame_size: int = 100 * 1024 * 1024  # largest response frame accepted
    # Refresh timing lives in the Metadata object (built with these same values by the client);
    # kept here so one object describes the client's whole network configuration.
    metadata_max_age_ms: int = 300_000  # metadata.max.age.ms
    retry_backoff_ms: int = 100  # retry.backoff.ms
    retry_backoff_max_ms: int = 1_000  # retry.backoff.max.ms
    allow_auto_topic_creation: bool = False  # the producer creates topics itself, or not at all
    metadata_recovery_strategy: str = "rebootstrap"  # metadata.recovery.strategy (or "none")
    metadata_recovery_rebootstrap_trigger_ms: int = 300_000  # ...recovery.rebootstrap.trigger.ms

    def __post_init__(self) -> None:
        self.security_protocol = self.security_protocol.upper()
        if self.security_protocol not in _SECURITY_PROTOCOLS:
            raise ConfigError(
                f"security.protocol {self.security_protocol!r} is not one of "
                f"{', '.join(_SECURITY_PROTOCOLS)}"
            )
        self.metadata_recovery_strategy = self.metadata_recovery_strategy.lower()
        if self.metadata_recovery_strategy not in ("rebootstrap", "none"):
            raise ConfigError(
                f"metadata.recovery.strategy {self.metadata_recovery_strategy!r} is not "
                "'rebootstrap' or 'none'"
            )
        if self.max_in_flight < 1:
            raise ConfigError("max.in.flight.requests.per.connection must be at least 1")
        if self.uses_sasl and not self.sasl_mechanism:
            raise ConfigError(f"security.protocol {self.security_protocol} needs sasl.mechanism")
        if self.tls is not None and not self.uses_ssl:
            raise ConfigError(
                f"ssl.* settings need security.protocol SSL or SASL_SSL, "
                f"not {self.security_protocol}"
            )

    def sasl_config(self) -> SaslConfig | None:
        """The SASL credentials. With OAUTHBEARER this acquires the process's login for these
        settings (starting its refresher): the caller releases it with
        :func:`~kafka_sink.net.oauth.login.release_login` when it closes."""
        if not self.uses_sasl:
            return None
        assert self.sasl_mechanism is not None
        if self.sasl_mechanism.upper() == "OAUTHBEARER":
            settings = dict(self.sasl_oauthbearer or {})
            login = acquire_login(settings, lambda: source_for(settings))
            return SaslConfig("OAUTHBEARER", oauth=login)
        return SaslConfig(self.sasl_mechanism, self.sasl_username or "", self.sasl_password or "")

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS client context (see :class:`~kafka_sink.net.tls.TlsConfig`), or None."""
        if not self.uses_ssl:
            return None
        return (self.tls or TlsConfig()).create_context()
