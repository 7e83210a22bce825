"""Named presets for the managed Kafka services: the settings each one documents, and its limits.

Role: a user opts into a preset by name (the sink's option ``preset``, the producer's
``preset=`` argument) and :func:`apply_preset` turns a client's dotted settings into what that
service needs before the config is parsed:

- ``msk-iam`` (Amazon MSK with IAM access control): ``SASL_SSL``, ``OAUTHBEARER`` with the
  ``msk-iam`` token provider (its region read from the MSK bootstrap host name when
  ``sasl.oauthbearer.msk.region`` is not set), port 9098 for a bootstrap host given without one, and
  ``reconnect.backoff.ms=1000`` (MSK caps new IAM connections per broker and second).
- ``confluent-cloud``: ``SASL_SSL``; ``PLAIN`` with an API key and secret (``sasl.username`` /
  ``sasl.password`` or a ``PlainLoginModule`` JAAS line), or ``OAUTHBEARER`` with the user's
  identity provider, whose tokens must carry the ``logicalCluster`` extension (and usually
  ``identityPoolId``); port 9092.
- ``event-hubs`` (Azure Event Hubs' Kafka endpoint): ``SASL_SSL``, port 9093; ``PLAIN`` with a
  connection string as ``sasl.password`` (the user name ``$ConnectionString`` is filled in), or
  ``OAUTHBEARER`` with Entra ID (the ``azure`` provider unless a token endpoint or another
  provider is set; the scope defaults to ``https://<namespace host>/.default``). Its limits:
  ``max.request.size`` at most 1,046,528 (the service closes the connection on a bigger request;
  default lowered to 1,000,000; the producer counts a request's own framing with its batches,
  ``producer/framing.py``, so at that setting no request exceeds the service's limit),
  ``connections.max.idle.ms`` and ``metadata.max.age.ms`` below 240,000 (it drops connections
  idle that long; both default to 180,000).
- ``google`` (Google Cloud Managed Service for Apache Kafka): ``SASL_SSL``, ``OAUTHBEARER`` with
  the ``google`` provider (Application Default Credentials), or ``PLAIN`` with a service
  account's e-mail and key; port 9092.

Invariants:
- What the user set explicitly is never replaced: a preset fills in only absent keys. A value
  outside the service's limit is refused with :class:`~kafka_sink.errors.ConfigError` naming the
  key, the limit and why; so is a mechanism the service does not take.
- A ``security.protocol`` the user set without SASL gets no ``sasl.*`` key from the preset (the
  client config refuses ``sasl.*`` keys without SASL); the limits still apply.
- Messages never quote a secret (``sasl.password``, ``sasl.jaas.config`` and the OAuth
  credentials are only tested for presence or for a module or extension name).
- Whether a cluster offers transactions is asked of the brokers (the sink's preflight), never
  guessed from a preset or a host name; :attr:`Preset.transactions_note` only adds the
  service's own words to that refusal.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kafka_sink.errors import ConfigError
from kafka_sink.net.config import java_integer
from kafka_sink.net.user_info import shown_value

__all__ = ["PRESETS", "PRESET_NAMES", "Limit", "Preset", "apply_preset", "preset_named"]

OAUTHBEARER = "OAUTHBEARER"
PLAIN = "PLAIN"
_TOKEN_PROVIDER = "sasl.oauthbearer.token.provider"
_TOKEN_ENDPOINT = "sasl.oauthbearer.token.endpoint.url"
_SCOPE = "sasl.oauthbearer.scope"
_JAAS = "sasl.jaas.config"
# A JAAS line's login module, read without parsing the (secret) options.
_JAAS_MODULE = re.compile(r"^\s*([A-Za-z0-9_.$]+)")
_MSK_REGION = "sasl.oauthbearer.msk.region"
# MSK's broker and bootstrap hosts (provisioned and serverless) end in the cluster's region.
_MSK_HOST = re.compile(
    r"\.kafka(?:-serverless)?\.([a-z]{2}(?:-[a-z]+)+-\d+)\.amazonaws\.com(?:\.cn)?$"
)
# How a message names a key (the sink's users know them as 'kafka.<key>').
_Shown = Callable[[str], str]
_EXTENSION = re.compile(r"(?:^|[\s,;])(?:extension_)?logicalCluster\s*=", re.IGNORECASE)


@dataclass(frozen=True)
class Limit:
    """An integer setting a service bounds: at most ``highest``; ``default`` when unset."""

    key: str
    highest: int
    default: int
    why: str
    #: The setting's "never" value (-1) is outside the limit too (the service closes anyway).
    never: int | None = None


@dataclass(frozen=True)
class Preset:
    """One managed service's settings (see the module docstring)."""

    name: str
    service: str
    port: int
    #: The SASL mechanisms the service takes; the first is the one used when nothing says.
    mechanisms: tuple[str, ...]
    #: The token provider (``sasl.oauthbearer.token.provider``) used for OAUTHBEARER when the
    #: settings name no token source; None: OAUTHBEARER needs the user's token endpoint.
    provider: str | None
    defaults: Mapping[str, str] = field(default_factory=dict)
    limits: tuple[Limit, ...] = ()
    #: What the service documents about Kafka transactions (for the preflight's refusal).
    transactions_note: str = ""


_EVENT_HUBS_IDLE = (
    "Azure closes inbound connections idle for 240,000 ms, and a producer that sends on a "
    "closed connection sees its batches expire"
)

PRESETS: Mapping[str, Preset] = {
    preset.name: preset
    for preset in (
        Preset(
            name="msk-iam",
            service="Amazon MSK with IAM access control",
            port=9098,
            mechanisms=(OAUTHBEARER,),
            provider="msk-iam",
            # MSK limits the rate of new IAM connections per broker; its guide suggests
            # backing off a second between reconnects.
            defaults={"reconnect.backoff.ms": "1000"},
        ),
        Preset(
            name="confluent-cloud",
            service="Confluent Cloud",
            port=9092,
            mechanisms=(PLAIN, OAUTHBEARER),
            provider=None,
        ),
        Preset(
            name="event-hubs",
            service="Azure Event Hubs",
            port=9093,
            mechanisms=(OAUTHBEARER, PLAIN),
            provider="azure",
            limits=(
                Limit(
                    "max.request.size",
                    1_046_528,
                    1_000_000,
                    "Event Hubs closes the connection on a request larger than 1,046,528 bytes",
                ),
                Limit("connections.max.idle.ms", 239_999, 180_000, _EVENT_HUBS_IDLE, never=-1),
                Limit(
                    "metadata.max.age.ms",
                    239_999,
                    180_000,
                    "Event Hubs drops connections idle for 240,000 ms, so metadata must be "
                    "refreshed more often than that",
                ),
            ),
            transactions_note=(
                "Event Hubs offers Kafka transactions only on some tiers (Premium and Dedicated)"
            ),
        ),
        Preset(
            name="google",
            service="Google Cloud Managed Service for Apache Kafka",
            port=9092,
            mechanisms=(OAUTHBEARER, PLAIN),
            provider="google",
        ),
    )
}
PRESET_NAMES = tuple(PRESETS)


def preset_named(name: str, *, origin: str = "preset") -> Preset:
    """The preset called ``name`` (any case, spaces around ignored), or a ConfigError."""
    preset = PRESETS.get(name.strip().lower())
    if preset is None:
        raise ConfigError(
            f"{origin} {shown_value(name)} is not a preset; known presets: "
            f"{', '.join(PRESET_NAMES)}"
        )
    return preset


def apply_preset(
    name: str,
    config: Mapping[str, object],
    *,
    key_prefix: str = "",
    origin: str = "preset",
) -> dict[str, object]:
    """``config`` with preset ``name``'s settings filled in where absent, its limits checked.

    ``key_prefix`` and ``origin`` are how the caller's user names keys and the preset in
    messages (the sink: ``kafka.`` and ``option 'preset'``).
    """
    preset = preset_named(name, origin=origin)
    out: dict[str, object] = {str(k).strip(): v for k, v in config.items()}

    def shown(key: str) -> str:
        return f"'{key_prefix}{key}'"

    servers = out.get("bootstrap.servers")
    if isinstance(servers, str):
        out["bootstrap.servers"] = _with_port(servers, preset.port)
    out.setdefault("security.protocol", "SASL_SSL")
    protocol = str(out["security.protocol"]).strip().upper()
    if protocol.startswith("SASL_"):
        _apply_sasl(preset, out, shown, origin)
    for key, value in preset.defaults.items():
        out.setdefault(key, value)
    for limit in preset.limits:
        _apply_limit(preset, limit, out, shown, origin)
    return out


def _apply_sasl(preset: Preset, out: dict[str, object], shown: _Shown, origin: str) -> None:
    given = out.get("sasl.mechanism")
    oauth = _names_oauth(out)
    plain = _names_plain(out)
    if given is not None:
        mechanism = str(given).strip().upper()
    elif oauth:
        mechanism = OAUTHBEARER
    elif plain:
        mechanism = PLAIN
    elif preset.provider is None:
        raise ConfigError(
            f"{origin} '{preset.name}' needs credentials: for {preset.service} set "
            f"{shown('sasl.username')} and {shown('sasl.password')} (an API key and its "
            f"secret), or {shown(_TOKEN_ENDPOINT)} with the OAuth client's id and secret"
        )
    else:
        mechanism = preset.mechanisms[0]
    if mechanism not in preset.mechanisms:
        raise ConfigError(
            f"{shown('sasl.mechanism')} is {shown_value(str(given))}, but {preset.service} "
            f"({origin} '{preset.name}') takes {' or '.join(preset.mechanisms)}. Fix: remove "
            f"{shown('sasl.mechanism')} or the preset"
        )
    out.setdefault("sasl.mechanism", mechanism)
    if mechanism == OAUTHBEARER:
        if not _names_source(out) and preset.provider is not None:
            out[_TOKEN_PROVIDER] = preset.provider
        if out.get(_TOKEN_PROVIDER) == "msk-iam" and _MSK_REGION not in out:
            region = _msk_region(out.get("bootstrap.servers"))
            if region is not None:
                out[_MSK_REGION] = region
        if preset.name == "event-hubs" and _SCOPE not in out:
            host = _first_host(out.get("bootstrap.servers"))
            if host:
                out[_SCOPE] = f"https://{host}/.default"
        if preset.name == "confluent-cloud" and not _has_logical_cluster(out):
            raise ConfigError(
                f"{origin} 'confluent-cloud' with OAUTHBEARER: Confluent Cloud needs the SASL "
                "extension logicalCluster (the cluster id, lkc-...) with every token, and "
                "identityPoolId unless the pool is chosen by the token's claims. Fix: "
                f"{shown('sasl.oauthbearer.extensions')}="
                "'logicalCluster=lkc-...,identityPoolId=pool-...' (or extension_logicalCluster "
                f"in {shown(_JAAS)})"
            )
    elif (
        mechanism == PLAIN
        and preset.name == "event-hubs"
        and "sasl.password" in out
        and "sasl.username" not in out
    ):
        out["sasl.username"] = "$ConnectionString"


def _apply_limit(
    preset: Preset, limit: Limit, out: dict[str, object], shown: _Shown, origin: str
) -> None:
    raw = out.get(limit.key)
    if raw is None:
        out[limit.key] = str(limit.default)
        return
    if isinstance(raw, bool):
        return  # the client config refuses it, naming the key
    value = raw if isinstance(raw, int) else java_integer(str(raw))
    if value is None:
        return  # not an integer: the client config refuses it, naming the key
    if value > limit.highest or (limit.never is not None and value == limit.never):
        bound = f"at most {limit.highest}"
        raise ConfigError(
            f"{shown(limit.key)} is {value}, outside what {preset.service} "
            f"allows ({origin} '{preset.name}': {bound}): {limit.why}. Fix: set it to "
            f"{bound}, or remove it for the preset's {limit.default}"
        )


def _names_oauth(out: Mapping[str, object]) -> bool:
    if any(k.startswith("sasl.oauthbearer.") for k in out):
        return True
    return _jaas_module(out).endswith("OAuthBearerLoginModule")


def _names_source(out: Mapping[str, object]) -> bool:
    """Whether the settings say where tokens come from (else the preset's provider does)."""
    if _TOKEN_PROVIDER in out or _TOKEN_ENDPOINT in out:
        return True
    return _jaas_module(out).endswith("OAuthBearerLoginModule")


def _msk_region(servers: object) -> str | None:
    """The AWS region an MSK bootstrap host names (``...kafka.<region>.amazonaws.com``)."""
    host = _first_host(servers)
    found = _MSK_HOST.search(host.lower()) if host else None
    return found.group(1) if found else None


def _names_plain(out: Mapping[str, object]) -> bool:
    if "sasl.username" in out or "sasl.password" in out:
        return True
    return _jaas_module(out).endswith("PlainLoginModule")


def _jaas_module(out: Mapping[str, object]) -> str:
    jaas = out.get(_JAAS)
    if not isinstance(jaas, str):
        return ""
    found = _JAAS_MODULE.match(jaas)
    return found.group(1) if found else ""


def _has_logical_cluster(out: Mapping[str, object]) -> bool:
    for key in ("sasl.oauthbearer.extensions", _JAAS):
        value = out.get(key)
        if isinstance(value, str) and _EXTENSION.search(value):
            return True
    return False


def _with_port(servers: str, port: int) -> str:
    """Each bootstrap entry given as a bare host gets the service's port."""
    entries = []
    for entry in servers.split(","):
        text = entry.strip()
        if not text:
            continue
        bracketed = text.startswith("[") and text.endswith("]")
        if bracketed or ":" not in text:
            text = f"{text}:{port}"
        entries.append(text)
    return ",".join(entries)


def _first_host(servers: object) -> str | None:
    if not isinstance(servers, str):
        return None
    first = servers.split(",")[0].strip()
    host = first.rpartition(":")[0] if ":" in first else first
    return host.strip("[]") or None
