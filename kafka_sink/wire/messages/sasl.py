"""SaslHandshake (key 17) v0-v1 and SaslAuthenticate (key 36) v0-v2.

Invariants: SaslHandshake is never flexible. ``auth_bytes`` may hold a password (PLAIN) or a
proof (SCRAM), so it is excluded from the dataclass repr.
"""

# kfield() returns a dataclasses.field(); ruff cannot see that.
# ruff: noqa: RUF009

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kafka_sink.wire.api import ApiKey
from kafka_sink.wire.schema import kfield


@dataclass(slots=True)
class SaslHandshakeResponse:
    API_KEY: ClassVar[ApiKey] = ApiKey.SASL_HANDSHAKE
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 1)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = None

    error_code: int = kfield("int16")
    mechanisms: list[str] = kfield("[]string")


@dataclass(slots=True)
class SaslHandshakeRequest:
    API_KEY: ClassVar[ApiKey] = ApiKey.SASL_HANDSHAKE
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 1)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = None
    RESPONSE_TYPE: ClassVar[type[SaslHandshakeResponse]] = SaslHandshakeResponse

    mechanism: str = kfield("string")


@dataclass(slots=True)
class SaslAuthenticateResponse:
    API_KEY: ClassVar[ApiKey] = ApiKey.SASL_AUTHENTICATE
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 2)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = 2

    error_code: int = kfield("int16")
    error_message: str | None = kfield("string", nullable="0+")
    auth_bytes: bytes = kfield("bytes", repr=False)
    session_lifetime_ms: int = kfield("int64", "1+")


@dataclass(slots=True)
class SaslAuthenticateRequest:
    API_KEY: ClassVar[ApiKey] = ApiKey.SASL_AUTHENTICATE
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 2)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = 2
    RESPONSE_TYPE: ClassVar[type[SaslAuthenticateResponse]] = SaslAuthenticateResponse

    auth_bytes: bytes = kfield("bytes", repr=False)
