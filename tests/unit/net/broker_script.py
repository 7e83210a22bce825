"""A scripted broker for the sans-IO tests: parse request frames, build response frames."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafka_sink.wire.api import CLIENT_VERSIONS, ApiKey
from kafka_sink.wire.framing import FrameDecoder, frame
from kafka_sink.wire.messages import REQUEST_TYPES, ApiVersionsResponse
from kafka_sink.wire.primitives import Reader, Writer
from kafka_sink.wire.schema import decode_from, encode, is_flexible


@dataclass
class SeenRequest:
    api_key: ApiKey
    version: int
    correlation_id: int
    client_id: str | None
    body: Any


class ScriptedBroker:
    """Decodes what the client wrote; encodes what the test wants the broker to answer."""

    def __init__(self) -> None:
        self._decoder = FrameDecoder(100 * 1024 * 1024)

    def requests(self, data: bytes) -> list[SeenRequest]:
        out: list[SeenRequest] = []
        for payload in self._decoder.feed(data):
            r = Reader(payload)
            api_key = ApiKey(r.int16())
            version = r.int16()
            correlation_id = r.int32()
            client_id = r.string(nullable=True)
            request_type = REQUEST_TYPES[api_key]
            if is_flexible(request_type, version):
                r.skip_tagged_fields()
            body = decode_from(request_type, r, version)
            out.append(SeenRequest(api_key, version, correlation_id, client_id, body))
        return out


def response_frame(response: Any, version: int, correlation_id: int) -> bytes:
    """A response frame as a broker would write it (header v0 for ApiVersions, KIP-511)."""
    w = Writer()
    w.int32(correlation_id)
    if not isinstance(response, ApiVersionsResponse) and is_flexible(type(response), version):
        w.tagged_fields()
    return frame(w.getvalue() + encode(response, version))


def api_versions_response(
    ranges: dict[ApiKey, tuple[int, int]] | None = None, *, error_code: int = 0
) -> ApiVersionsResponse:
    """Every API the client speaks at the client's own range, unless ``ranges`` says otherwise."""
    chosen = dict(CLIENT_VERSIONS)
    chosen[ApiKey.PRODUCE] = (0, 12)  # what Kafka 4.x advertises (KAFKA-18659)
    chosen.update(ranges or {})
    return ApiVersionsResponse(
        error_code=error_code,
        api_keys=[ApiVersionsResponse.ApiVersion(int(k), lo, hi) for k, (lo, hi) in chosen.items()],
    )


def unsupported_api_versions_v0(correlation_id: int, broker_max: int | None) -> bytes:
    """What a broker that does not know the requested ApiVersions version sends back."""
    w = Writer()
    w.int32(correlation_id)
    w.int16(35)
    entries = [] if broker_max is None else [(18, 0, broker_max)]
    w.int32(len(entries))
    for key, lo, hi in entries:
        w.int16(key)
        w.int16(lo)
        w.int16(hi)
    return frame(w.getvalue())
