"""What the network client's callers hand in (ClientRequest) and get back (ClientResponse).

Invariants: a ClientRequest is sent at most once; ``api_version``, ``correlation_id`` and
``sent_ms`` are filled in by ``NetworkClient.send``. A ClientResponse carries either the decoded
response, or ``response=None`` with ``disconnected``/``timed_out``/``error`` saying why (and
``response=None`` without error for an acks=0 request, which completes when written).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafka_sink.errors import KafkaError
from kafka_sink.wire.api import ApiKey

__all__ = ["ClientRequest", "ClientResponse"]


@dataclass(eq=False)
class ClientRequest:
    """A request for one node. ``version=None`` means "highest version negotiated with it"."""

    node_id: int
    request: Any
    version: int | None
    created_ms: int
    callback: Callable[[ClientResponse], None] | None = None
    expect_response: bool = True
    request_timeout_ms: int | None = None
    # Filled in by NetworkClient.send:
    api_version: int = field(default=-1, init=False)
    correlation_id: int = field(default=-1, init=False)
    sent_ms: int = field(default=-1, init=False)
    internal: bool = field(default=False, init=False, repr=False)

    @property
    def api_key(self) -> ApiKey:
        key: ApiKey = type(self.request).API_KEY
        return key


@dataclass(frozen=True, eq=False)
class ClientResponse:
    """How a :class:`ClientRequest` ended: a response, or disconnected / timed out / error."""

    request: ClientRequest
    response: Any | None
    disconnected: bool = False
    timed_out: bool = False
    error: KafkaError | None = None
    received_ms: int = 0

    @property
    def request_latency_ms(self) -> int:
        start = self.request.sent_ms if self.request.sent_ms >= 0 else self.request.created_ms
        return self.received_ms - start
