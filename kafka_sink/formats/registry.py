"""The driver's Schema Registry client: Confluent's REST API over ``schema.registry.*`` options.

Role: every registry call a write makes, made on the driver before any task runs (the executors
get schema ids, never a registry connection). :class:`SchemaRegistryConfig` turns the options
into settings or refuses them; :class:`SchemaRegistryClient` makes the calls:

- :meth:`~SchemaRegistryClient.register` (``POST /subjects/{s}/versions``) -> the schema id;
- :meth:`~SchemaRegistryClient.lookup` (``POST /subjects/{s}``): the id and version of a schema
  already registered under a subject, or None;
- :meth:`~SchemaRegistryClient.latest_version` (``GET /subjects/{s}/versions/latest``);
- :meth:`~SchemaRegistryClient.schema_by_id` (``GET /schemas/ids/{id}``);
- :meth:`~SchemaRegistryClient.check_compatibility`
  (``POST /compatibility/subjects/{s}/versions/latest?verbose=true``) -> the verdict and the
  registry's reasons; :meth:`~SchemaRegistryClient.ensure_compatible` raises
  :class:`IncompatibleSchemaError` on a "no";
- :meth:`~SchemaRegistryClient.get_compatibility` / :meth:`~SchemaRegistryClient.set_compatibility`
  (``/config/{s}``), the subject's level.

A schema is :class:`Schema` (text, ``schemaType`` ``AVRO``/``PROTOBUF``/``JSON``, references);
the JSON fields are the REST API's own names. The next layer (resolving each subject once per
query, the subject name strategies of :mod:`kafka_sink.formats.subjects`) builds on these
calls and caches their answers; this client caches nothing.

Options (Spark lower-cases keys; confluent-kafka's ``SchemaRegistryClient`` names, prefixed):

- ``schema.registry.url``: one or more comma-separated ``http(s)://`` base URLs, tried in turn;
- ``schema.registry.basic.auth.credentials.source``: ``USER_INFO`` (default) takes
  ``schema.registry.basic.auth.user.info`` (``user:password``); ``URL`` takes the user info of
  the URLs. ``SASL_INHERIT`` is refused (the sink does not hand Kafka's credentials on);
- ``schema.registry.bearer.auth.credentials.source``: ``STATIC_TOKEN`` (the only one) with
  ``schema.registry.bearer.auth.token``; ``schema.registry.bearer.auth.logical.cluster`` and
  ``...identity.pool.id`` are sent as Confluent Cloud's ``target-sr-cluster`` and
  ``Confluent-Identity-Pool-Id`` headers;
- ``schema.registry.ssl.ca.location``, ``...ssl.certificate.location``, ``...ssl.key.location``,
  ``...ssl.key.password``: PEM files for HTTPS (see :mod:`kafka_sink.net.http`);
- ``schema.registry.timeout.ms`` (10000): one HTTP exchange, whole (connect, TLS, request,
  headers and body); ``schema.registry.max.retries`` (2), ``schema.registry.retries.wait.ms``
  (500), ``schema.registry.retries.max.wait.ms`` (5000): rounds over the URLs after the first,
  and the doubling wait between rounds.

Invariants:
- Every key under ``schema.registry.`` is applied or refused with a
  :class:`~kafka_sink.errors.ConfigError` naming it and the fix; TLS keys with no ``https`` URL,
  both basic and bearer auth, a key without its certificate are refused, as is a file that is not
  there. With credentials set, the URLs are all ``https://`` or all ``http://``: a mix would send
  the credentials in clear text to an ``http://`` URL whenever an ``https://`` one fails.
- Passwords, user info and tokens never appear in ``repr``, logs or exception text; URLs are
  kept and shown without their user info. User info is read as HTTP clients read it
  (:mod:`kafka_sink.net.user_info`): a URL with an ``@`` after its host (a password holding an
  unencoded ``/``, ``?`` or ``#``) is refused with the advice to percent-encode, not half-used.
- A call is bounded: at most ``(max.retries + 1) * len(urls)`` exchanges of ``timeout.ms`` each
  (each one whole, however slowly the registry sends), plus the waits. A failure to get any
  answer raises :class:`SchemaRegistryUnavailableError` naming every URL and the last error; a
  401/403 raises :class:`SchemaRegistryAuthError` naming the URL (credentials refused are not
  retried); a 5xx, 408 or 429 moves on to the next URL.
- Answers are not trusted: a body is read up to :data:`MAX_ANSWER_BYTES` and no further, and
  every field a call uses is checked for its type and range (schema ids and versions are ints
  from 1 to 2^31-1, never bools or floats) before anything is returned or cached. An answer that
  is too large, not JSON, or not of the API's shape raises :class:`SchemaRegistryAnswerError`
  naming the URL, the call and what was wrong; nothing of the parsing escapes as a KeyError,
  TypeError, ValueError or RecursionError.
- No pyspark import: the producer's users import this room without Spark.
"""

from __future__ import annotations

import base64
import json
import reprlib
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from kafka_sink.clock import SYSTEM_CLOCK, Clock
from kafka_sink.errors import ConfigError
from kafka_sink.net.config import MAX_INT, parse_int
from kafka_sink.net.http import (
    HttpBodyTooLargeError,
    HttpResponse,
    HttpTlsConfig,
    HttpTransportError,
    exchange,
)
from kafka_sink.net.user_info import UserInfoError, mask_url, shown_value, split_user_info
from kafka_sink.sink_errors import (
    IncompatibleSchemaError,
    SchemaNotFoundError,
    SchemaRegistryAnswerError,
    SchemaRegistryAuthError,
    SchemaRegistryError,
    SchemaRegistryUnavailableError,
)

__all__ = [
    "MAX_ANSWER_BYTES",
    "MAX_SCHEMA_ID",
    "PREFIX",
    "CompatibilityResult",
    "IncompatibleSchemaError",
    "RegisteredSchema",
    "Schema",
    "SchemaNotFoundError",
    "SchemaReference",
    "SchemaRegistryAnswerError",
    "SchemaRegistryAuthError",
    "SchemaRegistryClient",
    "SchemaRegistryConfig",
    "SchemaRegistryError",
    "SchemaRegistryUnavailableError",
    "SchemaType",
    "Transport",
]

PREFIX = "schema.registry."
SchemaType = Literal["AVRO", "PROTOBUF", "JSON"]
SCHEMA_TYPES: tuple[SchemaType, ...] = ("AVRO", "PROTOBUF", "JSON")
COMPATIBILITY_LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)

_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_ACCEPT = (
    "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json; q=0.9, "
    "application/json; q=0.5"
)
# Answers that another URL, or the same one a moment later, may not give.
_RETRIABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
# The registry's error codes for a subject, version or schema it does not have.
_NOT_FOUND_CODES = frozenset({404, 40401, 40402, 40403})
#: The most a registry answer may be: a schema is one record of the registry's ``_schemas``
#: topic (1 MiB by default), and JSON escaping at most doubles it; past this, it is not an answer.
MAX_ANSWER_BYTES = 8 * 1024 * 1024
#: Schema ids and versions are Java ints in the registry, and start at 1.
MAX_SCHEMA_ID = 2**31 - 1

_KEYS = (
    "url",
    "basic.auth.credentials.source",
    "basic.auth.user.info",
    "bearer.auth.credentials.source",
    "bearer.auth.token",
    "bearer.auth.logical.cluster",
    "bearer.auth.identity.pool.id",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.key.password",
    "timeout.ms",
    "max.retries",
    "retries.wait.ms",
    "retries.max.wait.ms",
)


# -- schemas ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SchemaReference:
    """A schema this one imports: ``name`` as the importing schema names it (REST ``name``)."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class Schema:
    """A schema's text (Avro JSON, ``.proto`` text, JSON Schema), type and references."""

    schema_str: str
    schema_type: SchemaType = "AVRO"
    references: tuple[SchemaReference, ...] = ()

    def __post_init__(self) -> None:
        if self.schema_type not in SCHEMA_TYPES:
            raise ValueError(f"schemaType {self.schema_type!r}: use one of {SCHEMA_TYPES}")

    def to_json(self) -> dict[str, Any]:
        """The REST body; ``schemaType`` is left out for Avro (the default), as in Java."""
        body: dict[str, Any] = {"schema": self.schema_str}
        if self.schema_type != "AVRO":
            body["schemaType"] = self.schema_type
        if self.references:
            body["references"] = [ref.to_json() for ref in self.references]
        return body

    @classmethod
    def from_json(cls, doc: Any) -> Schema:
        """The schema of a registry answer; :class:`SchemaRegistryAnswerError` if it is not one."""
        try:
            return _schema_of(doc)
        except _MalformedError as exc:
            raise SchemaRegistryAnswerError(f"the registry answered with {exc}") from None


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as registered: its id (what the wire format carries), subject and version."""

    schema_id: int
    subject: str
    version: int
    schema: Schema


@dataclass(frozen=True)
class CompatibilityResult:
    is_compatible: bool
    messages: tuple[str, ...] = ()


# -- answers ------------------------------------------------------------------------------------

T = TypeVar("T")
_SHOWN = reprlib.Repr()
_SHOWN.maxstring = _SHOWN.maxother = 40
_SHOWN.maxlevel = 2


class _MalformedError(Exception):
    """What is wrong with an answer; the client adds the URL and the call."""


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "a JSON object"
    if isinstance(value, list):
        return "a JSON list"
    if isinstance(value, bool):
        return f"JSON {str(value).lower()}"
    if value is None:
        return "JSON null"
    return f"the JSON value {_SHOWN.repr(value)}"


def _object(doc: Any, what: str = "the answer") -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise _MalformedError(f"{_kind(doc)} where {what} should be a JSON object")
    return doc


def _required(doc: Mapping[str, Any], key: str) -> Any:
    if key not in doc:
        raise _MalformedError(f"no {key!r} in the answer")
    return doc[key]


def _wrong(key: str, value: Any, expected: str) -> _MalformedError:
    return _MalformedError(f"{key!r} is {_SHOWN.repr(value)}, not {expected}")


def _schema_id(value: Any, key: str) -> int:
    # bool is an int to Python, and json gives 1.5 as a float: neither is an id.
    if type(value) is not int or not 1 <= value <= MAX_SCHEMA_ID:
        what = "version" if key.endswith("version") else "id"
        raise _wrong(key, value, f"a schema {what} (an integer from 1 to {MAX_SCHEMA_ID})")
    return value


def _text(value: Any, key: str) -> str:
    if not isinstance(value, str):
        raise _wrong(key, value, "a string")
    return value


def _schema_of(doc: Any) -> Schema:
    """A schema answer: ``schema``, and ``schemaType`` and ``references`` when present."""
    doc = _object(doc)
    text = _text(_required(doc, "schema"), "schema")
    kind = doc.get("schemaType")
    if kind is None:
        kind = "AVRO"
    elif not isinstance(kind, str) or kind.upper() not in SCHEMA_TYPES:
        raise _wrong("schemaType", kind, f"one of {', '.join(SCHEMA_TYPES)}")
    raw_refs = doc.get("references")
    if raw_refs is None:
        raw_refs = []
    if not isinstance(raw_refs, list):
        raise _wrong("references", raw_refs, "a list of references")
    refs = []
    for i, raw in enumerate(raw_refs):
        ref = _object(raw, f"references[{i}]")
        refs.append(
            SchemaReference(
                _text(ref.get("name"), f"references[{i}].name"),
                _text(ref.get("subject"), f"references[{i}].subject"),
                _schema_id(ref.get("version"), f"references[{i}].version"),
            )
        )
    return Schema(text, kind.upper(), tuple(refs))  # type: ignore[arg-type]


def _registered_id(doc: Any) -> int:
    """A registration's answer: ``id``."""
    return _schema_id(_required(_object(doc), "id"), "id")


def _registered(doc: Any, subject: str, schema: Schema | None = None) -> RegisteredSchema:
    """A subject version answer: ``id``, ``version``, ``subject`` if present, and the schema."""
    doc = _object(doc)
    found = doc.get("subject", subject)
    return RegisteredSchema(
        _schema_id(_required(doc, "id"), "id"),
        _text(found, "subject"),
        _schema_id(_required(doc, "version"), "version"),
        schema if schema is not None else _schema_of(doc),
    )


def _verdict(doc: Any) -> CompatibilityResult:
    doc = _object(doc)
    verdict = _required(doc, "is_compatible")
    if not isinstance(verdict, bool):
        raise _wrong("is_compatible", verdict, "true or false")
    messages = doc.get("messages")
    if messages is None:
        messages = []
    elif isinstance(messages, str):
        messages = [messages]
    if not isinstance(messages, list) or not all(isinstance(m, str) for m in messages):
        raise _wrong("messages", messages, "a list of strings")
    return CompatibilityResult(verdict, tuple(messages))


def _level(doc: Any) -> str:
    doc = _object(doc)
    for key in ("compatibilityLevel", "compatibility"):
        if key in doc:
            return _text(doc[key], key)
    raise _MalformedError("no 'compatibilityLevel' in the answer")


# -- configuration ------------------------------------------------------------------------------


def _strip_user_info(url: str, key: str, index: int) -> tuple[str, str | None]:
    """``url`` without its user info, and that user info (None when there is none).

    The user info is read as an HTTP client reads it (:mod:`kafka_sink.net.user_info`); a URL
    it cannot be read from without guessing is refused, naming the URL by its place only.
    """
    try:
        split = split_user_info(url)
        parts = urllib.parse.urlsplit(split.url)
        _ = parts.port  # a port that is no number in 0..65535 raises ValueError
    except UserInfoError as exc:
        raise ConfigError(f"{key}: URL {index + 1}: {exc}") from None
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"{key}: {_shown_url(url)} is not an http:// or https:// URL with a host and a "
            "valid port; give the registry's base URL, e.g. https://registry.example.com:8081"
        )
    clean = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))
    if not split.has_user_info:
        return clean, None
    return clean, f"{split.user}:{split.password}" if split.password is not None else split.user


def _shown_url(url: str) -> str:
    """A URL as an error may quote it: no user info, at most :data:`SHOWN_CHARS` characters."""
    return shown_value(mask_url(url))


def _int_option(options: Mapping[str, str], key: str, default: int, minimum: int) -> int:
    raw = options.get(PREFIX + key)
    if raw is None:
        return default
    # Read as the Java client's ConfigDef reads an INT: a capped quote, never a raw ValueError.
    return parse_int(PREFIX + key, raw, minimum, MAX_INT)


def _file_option(options: Mapping[str, str], key: str) -> str | None:
    raw = options.get(PREFIX + key)
    if raw is None:
        return None
    try:
        found = Path(raw).is_file()
    except (OSError, ValueError):  # a name too long for the OS, a NUL byte
        found = False
    if not found:
        raise ConfigError(
            f"{PREFIX}{key}: no file at {shown_value(raw)}; give the path of a PEM file"
        )
    return raw


def _one_scheme(urls: Sequence[str]) -> None:
    """With credentials set, all the URLs ``https://`` or all ``http://``."""
    plain = [u for u in urls if u.startswith("http://")]
    if plain and len(plain) < len(urls):
        raise ConfigError(
            f"{PREFIX}url mixes https:// and http:// URLs while credentials are set: they would "
            f"go in clear text to {', '.join(plain)} whenever an https:// URL fails. Fix: make "
            f"every {PREFIX}url https://"
        )


@dataclass(frozen=True)
class SchemaRegistryConfig:
    """The ``schema.registry.*`` settings; ``repr`` shows no credential."""

    urls: tuple[str, ...]
    user_info: str | None = field(default=None, repr=False)
    bearer_token: str | None = field(default=None, repr=False)
    extra_headers: tuple[tuple[str, str], ...] = ()
    tls: HttpTlsConfig = field(default_factory=HttpTlsConfig)
    timeout_ms: int = 10_000
    max_retries: int = 2
    retries_wait_ms: int = 500
    retries_max_wait_ms: int = 5_000

    @property
    def auth(self) -> str:
        """Which credentials are sent: ``basic``, ``bearer`` or ``none``."""
        return "basic" if self.user_info else "bearer" if self.bearer_token else "none"

    def __repr__(self) -> str:
        return (
            f"SchemaRegistryConfig(urls={list(self.urls)!r}, auth={self.auth!r}, tls={self.tls!r}"
            f", timeout_ms={self.timeout_ms}, max_retries={self.max_retries})"
        )

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> SchemaRegistryConfig:
        """The settings the ``schema.registry.*`` keys of ``options`` give (others are ignored)."""
        given = {k.lower(): v for k, v in options.items() if k.lower().startswith(PREFIX)}
        unknown = sorted(k for k in given if k[len(PREFIX) :] not in _KEYS)
        if unknown:
            raise ConfigError(
                f"unknown Schema Registry option(s) {', '.join(unknown)}; the accepted ones are "
                + ", ".join(PREFIX + k for k in _KEYS)
            )
        raw_urls = [u.strip() for u in (given.get(PREFIX + "url") or "").split(",") if u.strip()]
        if not raw_urls:
            raise ConfigError(
                f"{PREFIX}url is missing or empty: give the registry's base URL (several, "
                "comma-separated, are tried in turn)"
            )
        stripped = [_strip_user_info(u, PREFIX + "url", i) for i, u in enumerate(raw_urls)]
        urls = tuple(u for u, _ in stripped)
        url_user_info = next((info for _, info in stripped if info), None)
        user_info = cls._basic_user_info(given, url_user_info)
        bearer = cls._bearer_token(given)
        if user_info and bearer:
            raise ConfigError(
                f"both basic auth ({PREFIX}basic.auth.*) and a bearer token ({PREFIX}bearer.auth."
                "token) are set: the registry takes one kind of credentials; remove the other"
            )
        if user_info or bearer:
            _one_scheme(urls)
        headers = tuple(
            (header, given[PREFIX + key])
            for key, header in (
                ("bearer.auth.logical.cluster", "target-sr-cluster"),
                ("bearer.auth.identity.pool.id", "Confluent-Identity-Pool-Id"),
            )
            if PREFIX + key in given
        )
        if headers and not bearer:
            raise ConfigError(
                f"{PREFIX}bearer.auth.logical.cluster and {PREFIX}bearer.auth.identity.pool.id go "
                f"with a bearer token: set {PREFIX}bearer.auth.token, or remove them"
            )
        return cls(
            urls=urls,
            user_info=user_info,
            bearer_token=bearer,
            extra_headers=headers,
            tls=cls._tls(given, urls),
            timeout_ms=_int_option(given, "timeout.ms", 10_000, 1),
            max_retries=_int_option(given, "max.retries", 2, 0),
            retries_wait_ms=_int_option(given, "retries.wait.ms", 500, 0),
            retries_max_wait_ms=_int_option(given, "retries.max.wait.ms", 5_000, 0),
        )

    @staticmethod
    def _basic_user_info(given: Mapping[str, str], url_user_info: str | None) -> str | None:
        key = PREFIX + "basic.auth.credentials.source"
        source = (given.get(key) or "").strip().upper()
        info = given.get(PREFIX + "basic.auth.user.info")
        if source not in ("", "USER_INFO", "URL", "SASL_INHERIT"):
            raise ConfigError(f"{key}: expected USER_INFO or URL, got {shown_value(given[key])}")
        if source == "SASL_INHERIT":
            raise ConfigError(
                f"{key}=SASL_INHERIT is not supported: the sink does not hand its Kafka SASL "
                f"credentials to the registry; set {PREFIX}basic.auth.user.info instead"
            )
        if source == "URL":
            if not url_user_info:
                raise ConfigError(
                    f"{key}=URL but {PREFIX}url has no user info: write it as "
                    "https://USER:PASSWORD@host, or use USER_INFO"
                )
            if info is not None:
                raise ConfigError(
                    f"{key}=URL takes the credentials from the URL; remove "
                    f"{PREFIX}basic.auth.user.info, or set the source to USER_INFO"
                )
            return url_user_info
        if url_user_info and info is not None:
            raise ConfigError(
                f"credentials in both {PREFIX}url and {PREFIX}basic.auth.user.info: keep one"
            )
        if info is not None and ":" not in info:
            raise ConfigError(f"{PREFIX}basic.auth.user.info: expected USER:PASSWORD")
        if source == "USER_INFO" and info is None:
            raise ConfigError(f"{key}=USER_INFO needs {PREFIX}basic.auth.user.info (USER:PASSWORD)")
        return info if info is not None else url_user_info

    @staticmethod
    def _bearer_token(given: Mapping[str, str]) -> str | None:
        key = PREFIX + "bearer.auth.credentials.source"
        source = (given.get(key) or "STATIC_TOKEN").strip().upper()
        token = given.get(PREFIX + "bearer.auth.token")
        if source != "STATIC_TOKEN":
            raise ConfigError(
                f"{key}: only STATIC_TOKEN is supported (got {shown_value(given[key])}); fetch "
                f"the token yourself and pass it in {PREFIX}bearer.auth.token"
            )
        if key in given and not token:
            raise ConfigError(f"{key}=STATIC_TOKEN needs {PREFIX}bearer.auth.token")
        if token is not None and not token.strip():
            raise ConfigError(f"{PREFIX}bearer.auth.token is empty")
        return token

    @staticmethod
    def _tls(given: Mapping[str, str], urls: Sequence[str]) -> HttpTlsConfig:
        tls = HttpTlsConfig(
            ca_location=_file_option(given, "ssl.ca.location"),
            certificate_location=_file_option(given, "ssl.certificate.location"),
            key_location=_file_option(given, "ssl.key.location"),
            key_password=given.get(PREFIX + "ssl.key.password"),
        )
        named = [k for k in _KEYS if k.startswith("ssl.") and PREFIX + k in given]
        if named and not any(u.startswith("https://") for u in urls):
            raise ConfigError(
                f"{', '.join(PREFIX + k for k in named)} set but no {PREFIX}url is https://: "
                "TLS settings would not be used; use https:// URLs or remove them"
            )
        if tls.key_location and not tls.certificate_location:
            raise ConfigError(
                f"{PREFIX}ssl.key.location needs {PREFIX}ssl.certificate.location (the client "
                "certificate the key belongs to)"
            )
        if tls.key_password is not None and not tls.certificate_location:
            raise ConfigError(
                f"{PREFIX}ssl.key.password opens the client key: set "
                f"{PREFIX}ssl.certificate.location and {PREFIX}ssl.key.location, or remove it"
            )
        return tls


# -- the client ---------------------------------------------------------------------------------

Transport = Callable[..., HttpResponse]
"""``exchange``'s signature (:func:`kafka_sink.net.http.exchange`); tests may pass a fake."""


def _error_of(response: HttpResponse) -> tuple[int, str]:
    """The registry's ``error_code`` and ``message`` (or the status and a bit of the body)."""
    try:
        doc = json.loads(response.body)
    except (ValueError, RecursionError):
        doc = None
    if not isinstance(doc, dict):
        return response.status, response.body[:200].decode("utf-8", "replace").strip()
    code, message = doc.get("error_code"), doc.get("message")
    return (
        code if type(code) is int else response.status,
        message if isinstance(message, str) else "",
    )


class SchemaRegistryClient:
    """Blocking, bounded calls to a Confluent-compatible Schema Registry (the driver's client)."""

    def __init__(
        self,
        config: SchemaRegistryConfig,
        *,
        transport: Transport = exchange,
        clock: Clock = SYSTEM_CLOCK,
        sleep_ms: Callable[[int], None] | None = None,
    ) -> None:
        self.config = config
        self._transport = transport
        self._clock = clock
        self._sleep_ms = sleep_ms or (lambda ms: time.sleep(ms / 1000.0))
        self._last_url = ""
        self._context = (
            config.tls.create_context() if any(u.startswith("https") for u in config.urls) else None
        )
        self._headers = {"Accept": _ACCEPT, **dict(config.extra_headers)}
        self._secret_headers: dict[str, str] = {}
        if config.user_info:
            token = base64.b64encode(config.user_info.encode("utf-8")).decode("ascii")
            self._secret_headers["Authorization"] = f"Basic {token}"
        elif config.bearer_token:
            self._secret_headers["Authorization"] = f"Bearer {config.bearer_token}"

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> SchemaRegistryClient:
        return cls(SchemaRegistryConfig.from_options(options))

    def __repr__(self) -> str:
        return f"SchemaRegistryClient({self.config!r})"

    # -- calls ----------------------------------------------------------------------------------

    def register(self, subject: str, schema: Schema, *, normalize: bool = False) -> int:
        """Register ``schema`` under ``subject`` (a no-op if it is there); its id."""
        query = "?normalize=true" if normalize else ""
        path = f"/subjects/{_path(subject)}/versions{query}"
        try:
            return self._call("POST", path, schema.to_json(), parse=_registered_id)
        except SchemaRegistryError as exc:
            if exc.status != 409:
                raise
            raise IncompatibleSchemaError(
                subject, [exc.reason or str(exc)], url=exc.url, level=self._level_or_none(subject)
            ) from None

    def lookup(self, subject: str, schema: Schema) -> RegisteredSchema | None:
        """The registration of ``schema`` under ``subject``, or None if it is not registered."""
        path = f"/subjects/{_path(subject)}"
        try:
            found = self._call(
                "POST", path, schema.to_json(), parse=lambda doc: _registered(doc, subject, schema)
            )
        except SchemaNotFoundError:
            return None
        # The subject asked about, whatever the answer spells.
        return RegisteredSchema(found.schema_id, subject, found.version, schema)

    def latest_version(self, subject: str) -> RegisteredSchema:
        """The subject's latest version (:class:`SchemaNotFoundError` if it has none)."""
        path = f"/subjects/{_path(subject)}/versions/latest"
        return self._call("GET", path, parse=lambda doc: _registered(doc, subject))

    def schema_by_id(self, schema_id: int) -> Schema:
        """The schema with global id ``schema_id``."""
        return self._call("GET", f"/schemas/ids/{int(schema_id)}", parse=_schema_of)

    def check_compatibility(self, subject: str, schema: Schema) -> CompatibilityResult:
        """Whether ``schema`` may follow the subject's latest version, with the registry's reasons.

        A subject with no version yet accepts any schema.
        """
        path = f"/compatibility/subjects/{_path(subject)}/versions/latest?verbose=true"
        try:
            return self._call("POST", path, schema.to_json(), parse=_verdict)
        except SchemaNotFoundError:
            return CompatibilityResult(True)

    def ensure_compatible(self, subject: str, schema: Schema) -> None:
        """Raise :class:`IncompatibleSchemaError` unless ``schema`` may follow the latest."""
        verdict = self.check_compatibility(subject, schema)
        if not verdict.is_compatible:
            level = self._level_or_none(subject)
            raise IncompatibleSchemaError(
                subject, verdict.messages, url=self._last_url, level=level
            )

    def get_compatibility(self, subject: str | None = None) -> str:
        """The compatibility level of ``subject`` (falling back to the global one), or global."""
        if subject is None:
            return self._call("GET", "/config", parse=_level)
        return self._call("GET", f"/config/{_path(subject)}?defaultToGlobal=true", parse=_level)

    def set_compatibility(self, level: str, subject: str | None = None) -> None:
        """Set ``subject``'s (or the global) compatibility level."""
        if level.upper() not in COMPATIBILITY_LEVELS:
            raise ValueError(f"compatibility {level!r}: use one of {COMPATIBILITY_LEVELS}")
        path = "/config" if subject is None else f"/config/{_path(subject)}"
        self._call("PUT", path, {"compatibility": level.upper()}, parse=lambda doc: None)

    # -- the exchange ---------------------------------------------------------------------------

    def _level_or_none(self, subject: str) -> str | None:
        try:
            return self.get_compatibility(subject) or None
        except SchemaRegistryError:
            return None

    def _call(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        parse: Callable[[Any], T],
    ) -> T:
        """One call, over the URLs in turn, in at most ``max.retries + 1`` rounds; the 2xx
        answer's JSON through ``parse`` (whose complaints name the URL)."""
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = dict(self._headers)
        if data is not None:
            headers["Content-Type"] = _CONTENT_TYPE
        cfg = self.config
        last = ""
        began_ms = self._clock.now_ms()
        for attempt in range(cfg.max_retries + 1):
            if attempt:
                self._sleep_ms(
                    min(cfg.retries_wait_ms * 2 ** (attempt - 1), cfg.retries_max_wait_ms)
                )
            for base in cfg.urls:
                url = base + path
                self._last_url = base
                try:
                    response = self._transport(
                        method, url, body=data, headers=headers,
                        secret_headers=self._secret_headers, timeout_ms=cfg.timeout_ms,
                        max_body_bytes=MAX_ANSWER_BYTES, context=self._context,
                    )  # fmt: skip
                except HttpBodyTooLargeError:
                    # An answer, not a missing one: another try would read as much again.
                    raise self._malformed(
                        method,
                        base,
                        path,
                        0,
                        f"a body larger than {MAX_ANSWER_BYTES} bytes (the most a registry "
                        "answer may be)",
                    ) from None
                except HttpTransportError as exc:
                    last = f"{base}: {exc.reason}"
                    continue
                if response.status in _RETRIABLE_STATUS:
                    _, message = _error_of(response)
                    last = f"{base}: HTTP {response.status} {message}".rstrip()
                    continue
                return self._answer(method, base, path, response, parse)
        waited_ms = self._clock.now_ms() - began_ms
        raise SchemaRegistryUnavailableError(
            f"Schema Registry unreachable: {method} {path.partition('?')[0]} got no answer from "
            f"{', '.join(cfg.urls)} in {cfg.max_retries + 1} round(s) over {waited_ms} ms "
            f"(timeout.ms={cfg.timeout_ms}); last error: {last}. Check {PREFIX}url and that the "
            "registry is up and reachable from the driver",
            url=", ".join(cfg.urls),
        )

    @staticmethod
    def _malformed(
        method: str, base: str, path: str, status: int, what: str
    ) -> SchemaRegistryAnswerError:
        return SchemaRegistryAnswerError(
            f"Schema Registry {base} answered {method} {path.partition('?')[0]} with {what}: is "
            f"{PREFIX}url the base URL of a Confluent-compatible Schema Registry?",
            url=base,
            status=status,
        )

    def _answer(
        self, method: str, base: str, path: str, response: HttpResponse, parse: Callable[[Any], T]
    ) -> T:
        if 200 <= response.status < 300:
            status = response.status
            try:
                doc = json.loads(response.body) if response.body else {}
            except ValueError:
                raise self._malformed(
                    method, base, path, status, "a body that is not JSON"
                ) from None
            except RecursionError:
                raise self._malformed(
                    method, base, path, status, "JSON nested too deeply to read"
                ) from None
            try:
                return parse(doc)
            except _MalformedError as exc:
                raise self._malformed(method, base, path, status, str(exc)) from None
        code, message = _error_of(response)
        what = f"{method} {path.partition('?')[0]}"
        if response.status in (401, 403):
            verdict = "refused the credentials" if response.status == 401 else "denied access"
            raise SchemaRegistryAuthError(
                f"Schema Registry {base} {verdict} (HTTP {response.status}) for {what}; check "
                f"{PREFIX}basic.auth.user.info or {PREFIX}bearer.auth.token and the "
                "principal's permissions",
                url=base,
                status=response.status,
                error_code=code,
            )
        if response.status == 404 or code in _NOT_FOUND_CODES:
            raise SchemaNotFoundError(
                f"Schema Registry {base}: {what}: {message or 'not found'} (error {code})",
                url=base,
                status=response.status,
                error_code=code,
            )
        raise SchemaRegistryError(
            f"Schema Registry {base} refused {what}: HTTP {response.status}, error {code}: "
            f"{message}",
            url=base,
            status=response.status,
            error_code=code,
            reason=message,
        )


def _path(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")
