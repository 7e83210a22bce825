"""Request and response headers: the one entry point the network layer uses.

Role: ``encode_request`` = request header + body; ``decode_response`` = response header + body.
Framing (the int32 size) lives in :mod:`kafka_sink.wire.framing`; :func:`encode_request_frame`
does both at once with a single copy of the records.

Invariants:
- Request header v2 (with a tagged-field section) when the request version is flexible,
  otherwise v1. ``client_id`` is always a classic int16-length nullable string, even in v2, so any
  broker can read the header of an ApiVersions request whose version it does not know.
- Response header v1 when the response version is flexible, otherwise v0 - except ApiVersions,
  whose response header is always v0 (KIP-511).
- An ApiVersions response carrying UNSUPPORTED_VERSION (35) is decoded as a v0 body, whatever
  version was sent: that is what brokers send when they do not know the requested version.
- Malformed payloads raise :class:`~kafka_sink.errors.ProtocolError`.
"""

from __future__ import annotations

import struct
from typing import Any

from kafka_sink.errors import ProtocolError, UnsupportedVersionError
from kafka_sink.wire.api import ApiKey
from kafka_sink.wire.messages.api_versions import ApiVersionsResponse
from kafka_sink.wire.primitives import Reader, Writer
from kafka_sink.wire.schema import decode_from, encode_into, is_flexible

__all__ = [
    "correlation_id_of",
    "decode_response",
    "encode_request",
    "encode_request_frame",
    "request_header_version",
    "response_header_version",
]

_HEADER = struct.Struct(">hhi")
_CORRELATION = struct.Struct(">i")


def request_header_version(request_type: type, version: int) -> int:
    return 2 if is_flexible(request_type, version) else 1


def response_header_version(response_type: type, version: int) -> int:
    if response_type is ApiVersionsResponse:
        return 0
    return 1 if is_flexible(response_type, version) else 0


def _encode(
    w: Writer, request: Any, version: int, correlation_id: int, client_id: str | None
) -> None:
    request_type = type(request)
    api_key: ApiKey = request_type.API_KEY
    w.raw(_HEADER.pack(int(api_key), version, correlation_id))
    w.string(client_id, nullable=True)
    if is_flexible(request_type, version):
        w.tagged_fields()
    encode_into(w, request, version)


def encode_request(request: Any, version: int, correlation_id: int, client_id: str | None) -> bytes:
    """Header + body of ``request`` at ``version``, without the int32 size prefix."""
    w = Writer()
    _encode(w, request, version, correlation_id, client_id)
    return w.getvalue()


def encode_request_frame(
    request: Any, version: int, correlation_id: int, client_id: str | None
) -> bytes:
    """Like ``frame(encode_request(...))`` but copies the records only once."""
    w = Writer()
    _encode(w, request, version, correlation_id, client_id)
    return w.getvalue_framed()


def correlation_id_of(payload: bytes | bytearray | memoryview) -> int:
    """The correlation id that opens every response payload."""
    if len(payload) < 4:
        raise ProtocolError(f"response of {len(payload)} bytes has no correlation id")
    value: int = _CORRELATION.unpack_from(payload, 0)[0]
    return value


def decode_response(
    request_type: type[Any], version: int, payload: bytes | bytearray | memoryview
) -> tuple[int, Any]:
    """(correlation id, response) for a response payload (the frame without its size).

    ``request_type`` is the class of the request this answers; ``version`` the version it was
    sent at.
    """
    response_type: type[Any] = request_type.RESPONSE_TYPE
    r = Reader(payload)
    correlation_id = r.int32()
    if response_type is ApiVersionsResponse:
        # KIP-511: header v0 always; an unknown version is answered in the v0 body format.
        if version > 0 and r.remaining >= 2 and r.int16() == UnsupportedVersionError.code:
            version = 0
        r.pos = 4
    elif is_flexible(response_type, version):
        r.skip_tagged_fields()
    response = decode_from(response_type, r, version)
    if r.remaining:
        raise ProtocolError(
            f"{response_type.__qualname__} v{version}: {r.remaining} unexpected trailing bytes"
        )
    return correlation_id, response
