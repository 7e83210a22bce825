"""Which :class:`~kafka_sink.net.oauth.token.TokenSource` a client's settings describe.

Role: :func:`token_source` reads the OAUTHBEARER settings of one client (Kafka's dotted keys, as
the Java client names them) and builds the source they describe:

- ``sasl.oauthbearer.token.provider``: a short name (``msk-iam``, ``azure``, ``google``: the
  providers in :mod:`kafka_sink.net.oauth.providers`, each behind an optional extra), a Python
  callable given programmatically, or an import path ``package.module:function``. A callable is
  called with no argument and returns ``(token, expires_at_ms)`` or an
  :class:`~kafka_sink.net.oauth.token.OAuthBearerToken`;
- otherwise ``sasl.oauthbearer.token.endpoint.url``: a ``file:`` URL is a file holding a token;
  an ``http(s)`` URL is an OIDC token endpoint asked with the client credentials grant
  (``sasl.oauthbearer.client.credentials.client.id`` / ``.client.secret`` or
  ``sasl.jaas.config``'s ``OAuthBearerLoginModule`` options ``clientId`` / ``clientSecret``),
  with a signed client assertion in place of the secret when ``sasl.oauthbearer.assertion.*``
  gives one (KIP-1258's private-key JWT), or with the jwt-bearer grant of KIP-1139 when
  ``sasl.oauthbearer.jwt.retriever.class`` names Java's ``JwtBearerJwtRetriever``.

SASL extensions (RFC 7628 ``key=value`` pairs: how Confluent Cloud's ``logicalCluster`` and
``identityPoolId`` travel) come from ``sasl.jaas.config``'s ``extension_<name>`` options and
librdkafka's ``sasl.oauthbearer.extensions`` list (``k=v,k=v``), and ride on every token.

Invariants:
- Every key of :data:`OAUTH_SOURCE_KEYS` that is given is applied by the source built or
  refused with :class:`~kafka_sink.errors.ConfigError` naming the key and what would use it;
  none is accepted and ignored. A setting given twice (a key and its ``sasl.jaas.config``
  option) is refused rather than one silently winning.
- Messages and ``repr`` never quote a value of :data:`OAUTH_SECRET_KEYS`, ``sasl.jaas.config``
  or an extension; other values are quoted capped (``shown_value``).
- Building a source does no network call; it imports a provider's library and loads a signing
  key, so a missing extra or a bad key fails at construction, on the driver.
"""

from __future__ import annotations

import importlib
import re
import time
import unicodedata
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from kafka_sink.errors import ConfigError
from kafka_sink.net.jaas import parse_jaas
from kafka_sink.net.oauth.keys import (
    BROKER_ONLY as _BROKER_ONLY,
)
from kafka_sink.net.oauth.keys import (
    CLIENT_ID,
    CLIENT_SECRET,
    CONNECT_TIMEOUT,
    ENDPOINT_URL,
    EXTENSIONS,
    OAUTH_SECRET_KEYS,
    OAUTH_SOURCE_KEYS,
    PROVIDER,
    PROVIDER_NAMES,
    READ_TIMEOUT,
    RETRIEVER,
    SCOPE,
)
from kafka_sink.net.oauth.keys import (
    PREFIX as _P,
)
from kafka_sink.net.oauth.oidc import (
    AssertionSettings,
    ClientAssertionSource,
    ClientCredentialsSource,
    FileTokenSource,
    JwtBearerSource,
    TokenChecks,
    check_private_key,
    file_url_path,
    jwt_claims,
)
from kafka_sink.net.oauth.token import OAuthBearerToken, TokenSource, TokenSourceError
from kafka_sink.net.user_info import UserInfoError, shown_value, split_user_info

__all__ = [
    "OAUTH_SECRET_KEYS",
    "OAUTH_SOURCE_KEYS",
    "PROVIDER_NAMES",
    "SettingsReader",
    "parse_extensions",
    "token_source",
]

_OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
_JAVA_PKG = "org.apache.kafka.common.security.oauthbearer."
# Java's JwtRetriever classes and what each one is here.
_RETRIEVERS = {
    "DefaultJwtRetriever": "default",
    "ClientCredentialsJwtRetriever": "client_credentials",
    "JwtBearerJwtRetriever": "jwt-bearer",
    "FileJwtRetriever": "file",
}
# The client-side validators Java offers: what token_from_jwt checks is ClientJwtValidator's.
_VALIDATORS = ("DefaultJwtValidator", "ClientJwtValidator")
_LOGIN_HANDLERS = (
    _JAVA_PKG + "OAuthBearerLoginCallbackHandler",
    _JAVA_PKG + "secured.OAuthBearerLoginCallbackHandler",
)
_LOGIN_CLASSES = (
    _JAVA_PKG + "internals.OAuthBearerRefreshingLogin",
    "org.apache.kafka.common.security.oauthbearer.internals.expiring.ExpiringCredentialRefreshingLogin",
)

DEFAULT_CONNECT_TIMEOUT_MS = 10_000
DEFAULT_READ_TIMEOUT_MS = 30_000
_MAX_INT = 2**31 - 1

# RFC 7628 / Kafka's SaslExtensions: a key is letters only, a value printable ASCII, space,
# tab, CR or LF; "auth" is the token's own key.
_EXTENSION_KEY = re.compile(r"[A-Za-z]+")
_EXTENSION_VALUE = re.compile(r"[\x21-\x7e \t\r\n]+")


class SettingsReader:
    """The settings, read key by key: what was read is what the source applies, and any other
    given key of :data:`OAUTH_SOURCE_KEYS` is refused by :meth:`refuse_unread`."""

    def __init__(self, settings: Mapping[str, object]) -> None:
        self._settings = settings
        self._read: set[str] = set()

    def given(self, key: str) -> bool:
        value = self._settings.get(key)
        return value is not None and not (isinstance(value, str) and not value.strip())

    def raw(self, key: str) -> object:
        self._read.add(key)
        return self._settings.get(key) if self.given(key) else None

    def text(self, key: str, default: str | None = None) -> str | None:
        value = self.raw(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {type(value).__name__}")
        return value.strip()

    def integer(self, key: str, default: int, lo: int, hi: int) -> int:
        value = self.raw(key)
        return default if value is None else _parse_int(key, value, lo, hi)

    def boolean(self, key: str, default: bool) -> bool:
        value = self.raw(key)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        shown = shown_value(value) if isinstance(value, str) else type(value).__name__
        raise ConfigError(f"{key}: expected true or false, got {shown}")

    def choice(self, key: str, default: str, options: tuple[str, ...]) -> str:
        value = self.text(key)
        if value is None:
            return default
        if value.upper() not in options:
            raise ConfigError(
                f"{key}: expected one of {', '.join(options)}; got {shown_value(value)}"
            )
        return value.upper()

    def listed(self, key: str) -> tuple[str, ...]:
        value = self.raw(key)
        if value is None:
            return ()
        if isinstance(value, str):
            items = value.split(",")
        elif isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            items = list(value)
        else:
            raise ConfigError(f"{key}: expected a comma-separated string or a list of strings")
        return tuple(i.strip() for i in items if i.strip())

    def refuse_unread(self, used_by: str) -> None:
        for key in sorted(OAUTH_SOURCE_KEYS):
            if self.given(key) and key not in self._read:
                raise ConfigError(f"{key}: not used by {used_by}; {_unused_hint(key)}")


# Java's String.trim() and Integer.parseInt, as the client config reads integers (this module
# sits under kafka_sink.net.config, which builds sources, so it cannot import its parsers).
_JAVA_TRIM = "".join(chr(c) for c in range(0x21))
_JAVA_INTEGER = re.compile(r"[+-]?\d+")


def _parse_int(key: str, raw: object, lo: int, hi: int) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int | str):
        raise ConfigError(f"{key}: expected an integer, got {type(raw).__name__}")
    if isinstance(raw, str):
        text = raw.strip(_JAVA_TRIM)
        if not _JAVA_INTEGER.fullmatch(text) or len(text) > 20:
            raise ConfigError(f"{key}: expected an integer, got {shown_value(raw)}")
        digits = "".join(str(unicodedata.decimal(c)) for c in text.lstrip("+-"))
        value = -int(digits) if text.startswith("-") else int(digits)
    else:
        value = raw
    if not lo <= value <= hi:
        raise ConfigError(f"{key}: {value} is out of range [{lo}, {hi}]")
    return value


def _unused_hint(key: str) -> str:
    if key in _BROKER_ONLY:
        return "it is a broker setting (brokers validate tokens), remove it from the client"
    if key.startswith(_P + "assertion."):
        return (
            "assertions are signed with sasl.oauthbearer.assertion.private.key.file (or read "
            "from .assertion.file) for the jwt-bearer grant (sasl.oauthbearer.jwt.retriever."
            f"class={_JAVA_PKG}JwtBearerJwtRetriever) or in place of the client secret"
        )
    if key.startswith(_P + "msk."):
        return "it belongs to sasl.oauthbearer.token.provider=msk-iam, or remove it"
    if key.startswith(_P + "azure."):
        return "it belongs to sasl.oauthbearer.token.provider=azure, or remove it"
    if key in (CLIENT_ID, CLIENT_SECRET, _P + "header.urlencode"):
        return "client credentials go with the client credentials grant (or the azure provider)"
    if key == ENDPOINT_URL:
        return "a token provider and a token endpoint are two sources: give one"
    return "remove it"


def _timeouts(reader: SettingsReader) -> tuple[int, int]:
    return (
        reader.integer(CONNECT_TIMEOUT, DEFAULT_CONNECT_TIMEOUT_MS, 1, _MAX_INT),
        reader.integer(READ_TIMEOUT, DEFAULT_READ_TIMEOUT_MS, 1, _MAX_INT),
    )


def _java_name(reader: SettingsReader, key: str, accepted: tuple[str, ...]) -> str | None:
    """A Java class name setting: accepted when it names one of ``accepted`` (simple names or
    under ``org.apache.kafka.common.security.oauthbearer``), else a ConfigError."""
    value = reader.text(key)
    if value is None:
        return None
    simple = value.removeprefix(_JAVA_PKG)
    if simple in accepted:
        return simple
    raise ConfigError(
        f"{key}: {shown_value(value)} is not supported: Java classes cannot be loaded here; "
        f"accepted: {', '.join(_JAVA_PKG + a for a in accepted)}"
    )


def parse_extensions(text: str, key: str = EXTENSIONS) -> dict[str, str]:
    """librdkafka's ``sasl.oauthbearer.extensions``: ``key=value`` pairs separated by commas."""
    out: dict[str, str] = {}
    for i, item in enumerate(text.split(",")):
        pair = item.strip()
        if not pair:
            continue
        name, eq, value = pair.partition("=")
        if not eq:
            raise ConfigError(f"{key}: entry {i + 1} is not key=value (expected k=v,k=v)")
        _check_extension(key, name.strip(), value, out)
    return out


def _check_extension(key: str, name: str, value: str, into: dict[str, str]) -> None:
    if not _EXTENSION_KEY.fullmatch(name):
        raise ConfigError(f"{key}: an extension name must be letters only (RFC 7628)")
    if name == "auth":
        raise ConfigError(f"{key}: 'auth' is the token's own key, not an extension")
    if not _EXTENSION_VALUE.fullmatch(value):
        raise ConfigError(
            f"{key}: the value of extension {name!r} must be printable ASCII, space, tab, CR or "
            "LF, and not empty (RFC 7628; not shown)"
        )
    if name in into:
        raise ConfigError(f"{key}: extension {name!r} is given twice")
    into[name] = value


class _Jaas:
    """``sasl.jaas.config`` with ``OAuthBearerLoginModule``: its options, read once each."""

    _KEY = "sasl.jaas.config"

    def __init__(self, text: str | None) -> None:
        self.options: dict[str, str] = {}
        self.extensions: dict[str, str] = {}
        if text is None:
            return
        entry = parse_jaas(text)
        if entry.login_module.rsplit(".", 1)[-1] != "OAuthBearerLoginModule":
            raise ConfigError(
                f"{self._KEY}: sasl.mechanism=OAUTHBEARER takes {_OAUTH_MODULE} (got another "
                "login module)"
            )
        for name, value in entry.options.items():
            if name.startswith("extension_"):
                _check_extension(self._KEY, name.removeprefix("extension_"), value, self.extensions)
            elif name in ("clientId", "clientSecret", "scope"):
                self.options[name] = value
            elif name.startswith("ssl."):
                raise ConfigError(
                    f"{self._KEY}: ssl.* options (Java's TLS settings for the token endpoint) are "
                    "not supported: an https endpoint is verified against the system's CA "
                    "certificates (SSL_CERT_FILE names another bundle)"
                )
            elif name.startswith("unsecuredLogin"):
                raise ConfigError(
                    f"{self._KEY}: {name.split('_')[0]} options make unsigned tokens, which only "
                    "test brokers accept; they are not supported: use a token endpoint or provider"
                )
            else:
                # Names outside the module's own may be a mis-quoted secret: never shown.
                raise ConfigError(
                    f"{self._KEY}: OAuthBearerLoginModule takes clientId, clientSecret, scope "
                    "and extension_<name> options; another option was given (not shown: it may "
                    "be part of a mis-quoted value)"
                )


def _one_of(reader: SettingsReader, key: str, jaas: _Jaas, option: str) -> str | None:
    """A setting that Java reads from the config key or, deprecated, from the JAAS option."""
    value = reader.text(key)
    in_jaas = jaas.options.get(option)
    if value is not None and in_jaas is not None:
        raise ConfigError(
            f"{key} and sasl.jaas.config's {option} option are both set: give it once "
            f"({key} is Java 4.x's name; the JAAS option is the older form)"
        )
    if value is None and in_jaas is not None:
        value = in_jaas.strip() or None
    return value


def _checks(reader: SettingsReader, extensions: Mapping[str, str]) -> TokenChecks:
    sub = reader.text(_P + "sub.claim.name", "sub")
    scope = reader.text(_P + "scope.claim.name", "scope")
    audience = reader.listed(_P + "expected.audience")
    return TokenChecks(
        sub_claim_name=sub or "sub",
        scope_claim_name=scope or "scope",
        expected_audience=audience,
        expected_issuer=reader.text(_P + "expected.issuer"),
        extensions=dict(extensions),
    )


def _extensions(reader: SettingsReader, jaas: _Jaas) -> dict[str, str]:
    listed = reader.text(EXTENSIONS)
    out = dict(jaas.extensions)
    if listed is not None:
        for name, value in parse_extensions(listed).items():
            if name in out:
                raise ConfigError(
                    f"{EXTENSIONS}: extension {name!r} is also given as sasl.jaas.config's "
                    f"extension_{name}: give it once"
                )
            out[name] = value
    return out


def _endpoint_url(reader: SettingsReader) -> str | None:
    url = reader.text(ENDPOINT_URL)
    if url is None:
        return None
    try:
        if split_user_info(url).has_user_info:
            raise ConfigError(
                f"{ENDPOINT_URL}: credentials in the URL are not sent; give them as "
                f"{CLIENT_ID} / {CLIENT_SECRET}"
            )
    except UserInfoError as exc:
        raise ConfigError(f"{ENDPOINT_URL}: {exc}") from None
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme not in ("http", "https", "file") or (scheme != "file" and "://" not in url):
        raise ConfigError(
            f"{ENDPOINT_URL}: expected an http(s):// token endpoint URL or a file: URL"
        )
    return url


def token_source(settings: Mapping[str, object]) -> TokenSource:
    """The token source ``settings`` (a client's dotted keys) describe."""
    reader = SettingsReader(settings)
    jaas_text = settings.get("sasl.jaas.config")
    if jaas_text is not None and not isinstance(jaas_text, str):
        raise ConfigError("sasl.jaas.config: expected a string")
    jaas = _Jaas(jaas_text if jaas_text and jaas_text.strip() else None)
    _java_name(reader, "sasl.login.callback.handler.class", _handler_names())
    _java_name(reader, "sasl.login.class", _login_names())
    _java_name(reader, _P + "jwt.validator.class", _VALIDATORS)
    extensions = _extensions(reader, jaas)

    source: TokenSource
    if reader.given(PROVIDER):
        source = _provider_source(reader, jaas, extensions)
    else:
        source = _endpoint_source(reader, jaas, extensions)
    if jaas.options:
        unused = sorted(jaas.options)
        raise ConfigError(
            f"sasl.jaas.config: option {unused[0]!r} is not used by {source.describe()}"
        )
    reader.refuse_unread(source.describe())
    return source


def _handler_names() -> tuple[str, ...]:
    return tuple(n.removeprefix(_JAVA_PKG) for n in _LOGIN_HANDLERS)


def _login_names() -> tuple[str, ...]:
    return tuple(n.removeprefix(_JAVA_PKG) for n in _LOGIN_CLASSES)


def _endpoint_source(
    reader: SettingsReader, jaas: _Jaas, extensions: Mapping[str, str]
) -> TokenSource:
    url = _endpoint_url(reader)
    if url is None:
        raise ConfigError(
            f"{ENDPOINT_URL}: sasl.mechanism=OAUTHBEARER needs a token source: "
            f"{ENDPOINT_URL} (an OIDC token endpoint) or {PROVIDER} "
            f"({', '.join(PROVIDER_NAMES)}, a callable or package.module:function)"
        )
    kind = _RETRIEVERS.get(_java_name(reader, RETRIEVER, tuple(_RETRIEVERS)) or "", "default")
    is_file = urllib.parse.urlsplit(url).scheme.lower() == "file"
    if kind == "file" and not is_file:
        raise ConfigError(f"{RETRIEVER}: FileJwtRetriever reads a file: {ENDPOINT_URL}")
    if is_file and kind not in ("default", "file"):
        raise ConfigError(
            f"{ENDPOINT_URL}: a file: URL is a token file; {RETRIEVER} names a grant that asks "
            "an http(s) endpoint"
        )
    checks = _checks(reader, extensions)
    if is_file:
        return FileTokenSource(file_url_path(url), checks=checks)
    connect_ms, read_ms = _timeouts(reader)
    scope = _one_of(reader, SCOPE, jaas, "scope")
    jaas.options.pop("scope", None)
    if kind == "jwt-bearer":
        assertion = _assertion_settings(reader)
        return JwtBearerSource(
            url,
            assertion=assertion,
            scope=scope,
            checks=checks,
            connect_timeout_ms=connect_ms,
            read_timeout_ms=read_ms,
        )
    client_id = _one_of(reader, CLIENT_ID, jaas, "clientId")
    secret = _one_of(reader, CLIENT_SECRET, jaas, "clientSecret")
    jaas.options.pop("clientId", None)
    jaas.options.pop("clientSecret", None)
    signed = [
        k for k in (_P + "assertion.file", _P + "assertion.private.key.file") if reader.given(k)
    ]
    if signed:
        # KIP-1258: a client assertion in place of the secret (private-key JWT).
        if secret is not None:
            raise ConfigError(
                f"{signed[0]} and the client secret are both set: the client credentials grant "
                "authenticates with one of them; remove the other"
            )
        return ClientAssertionSource(
            url,
            client_id=client_id,
            assertion=_assertion_settings(reader),
            scope=scope,
            checks=checks,
            connect_timeout_ms=connect_ms,
            read_timeout_ms=read_ms,
        )
    if client_id is None or secret is None:
        missing = CLIENT_ID if client_id is None else CLIENT_SECRET
        raise ConfigError(
            f"{missing}: the client credentials grant needs a client id and secret "
            f"({CLIENT_ID} / {CLIENT_SECRET}, or sasl.jaas.config's clientId / clientSecret); "
            f"for a signed assertion instead set {RETRIEVER}={_JAVA_PKG}JwtBearerJwtRetriever"
        )
    return ClientCredentialsSource(
        url,
        client_id=client_id,
        client_secret=secret,
        scope=scope,
        urlencode=reader.boolean(_P + "header.urlencode", False),
        checks=checks,
        connect_timeout_ms=connect_ms,
        read_timeout_ms=read_ms,
    )


def _assertion_settings(reader: SettingsReader) -> AssertionSettings:
    file = reader.text(_P + "assertion.file")
    if file is not None:
        # Java ignores every other assertion.* key then; here they are refused (unread).
        return AssertionSettings(assertion_file=file)
    key_file = reader.text(_P + "assertion.private.key.file")
    if key_file is None:
        raise ConfigError(
            f"{_P}assertion.private.key.file: the jwt-bearer grant needs a signing key (a PEM "
            f"private key file) or a pre-signed {_P}assertion.file"
        )
    algorithm = reader.choice(_P + "assertion.algorithm", "RS256", ("RS256", "ES256"))
    settings = AssertionSettings(
        private_key_file=key_file,
        private_key_passphrase=reader.text(_P + "assertion.private.key.passphrase"),
        algorithm=algorithm,
        template_file=reader.text(_P + "assertion.template.file"),
        claim_iss=reader.text(_P + "assertion.claim.iss"),
        claim_sub=reader.text(_P + "assertion.claim.sub"),
        claim_aud=reader.text(_P + "assertion.claim.aud"),
        # Java's ranges.
        exp_seconds=reader.integer(_P + "assertion.claim.exp.seconds", 300, 0, 86400),
        nbf_seconds=reader.integer(_P + "assertion.claim.nbf.seconds", 60, 0, 3600),
        include_jti=reader.boolean(_P + "assertion.claim.jti.include", False),
    )
    check_private_key(settings)
    return settings


# -- token providers ------------------------------------------------------------------------------


def _provider_source(
    reader: SettingsReader, jaas: _Jaas, extensions: Mapping[str, str]
) -> TokenSource:
    value = reader.raw(PROVIDER)
    if isinstance(value, str):
        name = value.strip()
        if name.lower() in PROVIDER_NAMES:
            return _named_provider(name.lower(), reader, jaas, extensions)
        if ":" in name:
            return CallableSource(_import_callable(name), name=name, extensions=extensions)
        raise ConfigError(
            f"{PROVIDER}: {shown_value(name)} is neither a provider ({', '.join(PROVIDER_NAMES)}) "
            "nor an import path package.module:function"
        )
    if callable(value):
        name = getattr(value, "__qualname__", None) or type(value).__name__
        return CallableSource(value, name=str(name), extensions=extensions)
    raise ConfigError(
        f"{PROVIDER}: expected a provider name, an import path or a callable, got "
        f"{type(value).__name__}"
    )


def _named_provider(
    name: str, reader: SettingsReader, jaas: _Jaas, extensions: Mapping[str, str]
) -> TokenSource:
    connect_ms, read_ms = _timeouts(reader)
    if name == "msk-iam":
        from kafka_sink.net.oauth.providers.msk_iam import MskIamSource

        return MskIamSource(
            region=reader.text(_P + "msk.region"),
            profile=reader.text(_P + "msk.profile"),
            role_arn=reader.text(_P + "msk.role.arn"),
            role_session_name=reader.text(_P + "msk.role.session.name"),
            extensions=extensions,
            connect_timeout_ms=connect_ms,
            read_timeout_ms=read_ms,
        )
    if name == "azure":
        from kafka_sink.net.oauth.providers.azure import AzureSource

        client_id = _one_of(reader, CLIENT_ID, jaas, "clientId")
        secret = _one_of(reader, CLIENT_SECRET, jaas, "clientSecret")
        scope = _one_of(reader, SCOPE, jaas, "scope")
        for option in ("clientId", "clientSecret", "scope"):
            jaas.options.pop(option, None)
        bootstrap = reader_bootstrap(reader)
        return AzureSource(
            scope=scope,
            bootstrap_servers=bootstrap,
            tenant_id=reader.text(_P + "azure.tenant.id"),
            client_id=client_id,
            client_secret=secret,
            certificate_file=reader.text(_P + "azure.certificate.file"),
            certificate_password=reader.text(_P + "azure.certificate.password"),
            checks=_checks(reader, extensions),
            connect_timeout_ms=connect_ms,
            read_timeout_ms=read_ms,
        )
    from kafka_sink.net.oauth.providers.google import GoogleSource

    scope = _one_of(reader, SCOPE, jaas, "scope")
    jaas.options.pop("scope", None)
    return GoogleSource(
        scope=scope, extensions=extensions, connect_timeout_ms=connect_ms, read_timeout_ms=read_ms
    )


def reader_bootstrap(reader: SettingsReader) -> tuple[str, ...]:
    """``bootstrap.servers`` as given (the client applies it; a provider may derive from it)."""
    raw = reader._settings.get("bootstrap.servers")
    if isinstance(raw, str):
        return tuple(s.strip() for s in raw.split(",") if s.strip())
    if isinstance(raw, list | tuple):
        return tuple(str(s).strip() for s in raw)
    return ()


def _import_callable(path: str) -> Callable[[], object]:
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"{PROVIDER}: {shown_value(path)} is not package.module:function")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(
            f"{PROVIDER}: module {shown_value(module_name)} could not be imported "
            f"({type(exc).__name__}: {shown_value(str(exc))})"
        ) from None
    for part in attr.split("."):
        if not hasattr(target, part):
            raise ConfigError(f"{PROVIDER}: {shown_value(module_name)} has no {shown_value(attr)}")
        target = getattr(target, part)
    if not callable(target):
        raise ConfigError(f"{PROVIDER}: {shown_value(path)} is not callable")
    return target  # type: ignore[no-any-return]


#: Epoch milliseconds below this are seconds given by mistake (before 1973 in milliseconds).
_MIN_EPOCH_MS = 10**11


class CallableSource:
    """A user's callable: no arguments, returns ``(token, expires_at_ms)`` or an
    :class:`OAuthBearerToken`. The principal is the token's ``sub`` when it is a JWT."""

    def __init__(
        self, fn: Callable[[], object], *, name: str, extensions: Mapping[str, str]
    ) -> None:
        self._fn = fn
        self._name = name
        self._extensions = dict(extensions)

    def describe(self) -> str:
        return f"token provider {self._name}"

    def __repr__(self) -> str:
        return f"CallableSource({self._name!r})"

    def fetch(self) -> OAuthBearerToken:
        where = self.describe()
        try:
            result = self._fn()
        except TokenSourceError:
            raise
        except Exception as exc:
            # The callable's own text may hold anything: only its kind is shown.
            raise TokenSourceError(f"{where}: raised {type(exc).__name__}", may_clear=True) from exc
        token = _callable_token(result, where, self._extensions)
        if token.expires_at_ms <= time.time() * 1000:
            raise TokenSourceError(f"{where}: returned a token that has expired", may_clear=False)
        return token


def _callable_token(result: object, where: str, extensions: Mapping[str, str]) -> OAuthBearerToken:
    def refuse(why: str) -> TokenSourceError:
        return TokenSourceError(f"{where}: {why}", may_clear=False)

    if isinstance(result, OAuthBearerToken):
        merged = dict(extensions)
        for name, value in result.extensions.items():
            if merged.get(name, value) != value:
                raise refuse(
                    f"the token's extension {name!r} differs from the configured one; give it once"
                )
            merged[name] = value
        token = OAuthBearerToken(
            result.value,
            result.expires_at_ms,
            principal=result.principal,
            issued_at_ms=result.issued_at_ms,
            extensions=merged,
        )
    elif isinstance(result, tuple) and len(result) == 2:
        value, expires = result
        if not isinstance(value, str) or not value:
            raise refuse("expected (token: str, expires_at_ms: int); the token is no string")
        if isinstance(expires, bool) or not isinstance(expires, int):
            raise refuse("expected (token: str, expires_at_ms: int); the expiry is no int")
        claims = jwt_claims(value)
        sub = claims.get("sub") if claims else None
        token = OAuthBearerToken(
            value,
            expires,
            principal=sub if isinstance(sub, str) else None,
            extensions=dict(extensions),
        )
    else:
        raise refuse(
            f"expected (token, expires_at_ms) or an OAuthBearerToken, got {type(result).__name__}"
        )
    if (
        not isinstance(token.value, str)
        or not token.value
        or any(not 0x20 < ord(c) < 0x7F for c in token.value)
    ):
        raise refuse("the token is empty or holds characters other than printable ASCII")
    if token.expires_at_ms < _MIN_EPOCH_MS:
        raise refuse(
            "expires_at_ms is epoch milliseconds; the value given looks like seconds (x1000)"
        )
    return token
