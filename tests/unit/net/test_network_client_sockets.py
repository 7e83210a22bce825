"""NetworkClient over real loopback sockets against a tiny in-test broker (no Kafka needed)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from kafka_sink.clock import SYSTEM_CLOCK
from kafka_sink.errors import KafkaTimeoutError
from kafka_sink.net.connection import ConnectionState
from kafka_sink.net.metadata import Metadata
from kafka_sink.net.network_client import (
    ClientRequest,
    ClientResponse,
    NetworkClient,
    NetworkConfig,
)
from kafka_sink.wire.api import ApiKey
from kafka_sink.wire.messages import MetadataRequest
from tests.fakes.metadata import metadata_response

from .broker_script import ScriptedBroker, api_versions_response, response_frame


class TinyBroker:
    """Answers ApiVersions, and Metadata while ``answer_metadata`` is set; ignores the rest."""

    def __init__(self) -> None:
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(8)
        self.server.settimeout(0.2)
        self.port: int = self.server.getsockname()[1]
        self.answer_metadata = True
        self.connections = 0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        accept = threading.Thread(target=self._accept, daemon=True)
        accept.start()
        self._threads.append(accept)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                continue
            self.connections += 1
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()
            self._threads.append(t)

    def _serve(self, conn: socket.socket) -> None:
        broker = ScriptedBroker()
        conn.settimeout(0.2)
        with conn:
            while not self._stop.is_set():
                try:
                    data = conn.recv(65536)
                except TimeoutError:
                    continue
                except OSError:
                    return
                if not data:
                    return
                for seen in broker.requests(data):
                    if seen.api_key is ApiKey.API_VERSIONS:
                        reply = api_versions_response()
                    elif seen.api_key is ApiKey.METADATA and self.answer_metadata:
                        reply = metadata_response(None, brokers=[(1, "127.0.0.1", self.port)])
                    else:
                        continue
                    conn.sendall(response_frame(reply, seen.version, seen.correlation_id))

    def close(self) -> None:
        self._stop.set()
        self.server.close()
        for t in self._threads:
            t.join(2)


@pytest.fixture
def tiny_broker() -> Iterator[TinyBroker]:
    broker = TinyBroker()
    yield broker
    broker.close()


def _poll_until(client: NetworkClient, done: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, repr(client)
        client.poll(50, SYSTEM_CLOCK.now_ms())


def test_bootstrap_then_request_timeout_then_reconnect(tiny_broker: TinyBroker) -> None:
    metadata = Metadata(retry_backoff_ms=10)
    client = NetworkClient(
        NetworkConfig(
            bootstrap_servers=f"127.0.0.1:{tiny_broker.port}",
            request_timeout_ms=300,
            reconnect_backoff_ms=10,
        ),
        metadata,
        SYSTEM_CLOCK,
    )
    try:
        client.bootstrap(SYSTEM_CLOCK.now_ms())
        _poll_until(client, lambda: metadata.version > 0)
        assert [n.node_id for n in metadata.nodes()] == [1]
        _poll_until(client, lambda: client.ready(1, SYSTEM_CLOCK.now_ms()))

        tiny_broker.answer_metadata = False  # the broker goes quiet
        done: list[ClientResponse] = []
        started = time.monotonic()
        request = ClientRequest(
            1, MetadataRequest.for_topics([]), None, SYSTEM_CLOCK.now_ms(), done.append
        )
        client.send(request, SYSTEM_CLOCK.now_ms())
        # poll() may be asked to wait far longer: the request deadline bounds the wait.
        while not done:
            client.poll(10_000, SYSTEM_CLOCK.now_ms())
        assert time.monotonic() - started < 5
        assert done[0].timed_out and done[0].disconnected
        assert isinstance(done[0].error, KafkaTimeoutError)
        assert client.connection_state(1) is ConnectionState.DISCONNECTED

        tiny_broker.answer_metadata = True
        connections = tiny_broker.connections
        _poll_until(client, lambda: client.ready(1, SYSTEM_CLOCK.now_ms()))
        assert tiny_broker.connections > connections
    finally:
        client.close()


def test_wakeup_from_another_thread_ends_a_long_poll(tiny_broker: TinyBroker) -> None:
    metadata = Metadata()
    client = NetworkClient(
        NetworkConfig(bootstrap_servers=f"127.0.0.1:{tiny_broker.port}"), metadata, SYSTEM_CLOCK
    )
    try:
        client.bootstrap(SYSTEM_CLOCK.now_ms())
        _poll_until(client, lambda: metadata.version > 0)
        client.poll(0, SYSTEM_CLOCK.now_ms())
        timer = threading.Timer(0.1, client.wakeup)
        timer.start()
        started = time.monotonic()
        client.poll(30_000, SYSTEM_CLOCK.now_ms())
        timer.join()
        assert time.monotonic() - started < 10
    finally:
        client.close()
