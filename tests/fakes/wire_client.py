"""A blocking Kafka client of one socket, for tests of the wire layer against a real broker.

No network layer is involved: requests are framed with ``encode_request_frame``, frames read with
``FrameDecoder`` and parsed with ``decode_response``, so what a test sees is what the broker
said. One request at a time on one connection; correlation ids count up from 1.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

from kafka_sink.wire.framing import FrameDecoder
from kafka_sink.wire.protocol import decode_response, encode_request_frame

# The create time of the records these tests build by hand (fixed, so reads compare exactly).
TIMESTAMP_MS = 1_700_000_000_000

# Coordinator answers that mean "ask again soon": load in progress, not available, not
# coordinator, concurrent transactions.
_RETRY_COORDINATOR = {14, 15, 16, 51}


class Client:
    """One blocking connection: send a request, wait for its response."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.split(",", maxsplit=1)[0].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.decoder = FrameDecoder(max_frame_size=64 * 1024 * 1024)
        self.correlation_id = 0
        self.pending: list[bytes] = []

    def send_raw(self, frame: bytes) -> bytes:
        self.sock.sendall(frame)
        while not self.pending:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("broker closed the connection")
            self.pending.extend(self.decoder.feed(chunk))
        return self.pending.pop(0)

    def call(self, request: Any, version: int) -> Any:
        self.correlation_id += 1
        payload = self.send_raw(
            encode_request_frame(request, version, self.correlation_id, "wire-test")
        )
        correlation_id, response = decode_response(type(request), version, payload)
        assert correlation_id == self.correlation_id
        return response

    def close(self) -> None:
        self.sock.close()


def call_until_ready(
    client: Client, request: Any, version: int, code_of: Callable[[Any], int]
) -> Any:
    """Repeat ``request`` while the coordinator answers "not yet" (30 s at most)."""
    deadline = time.monotonic() + 30
    while True:
        response = client.call(request, version)
        if code_of(response) not in _RETRY_COORDINATOR or time.monotonic() > deadline:
            return response
        time.sleep(0.2)
