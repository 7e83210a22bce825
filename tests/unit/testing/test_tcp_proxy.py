"""TcpProxy against a local echo server: forwarding, delay, pause/resume, cut, clean close."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from kafka_sink.testing.proxy import TcpProxy


@pytest.fixture
def echo_port() -> Iterator[int]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.1)
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            while True:
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                conn.sendall(data)

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield int(server.getsockname()[1])
    stop.set()
    thread.join(timeout=5)
    server.close()


def _connect(proxy: TcpProxy) -> socket.socket:
    sock = socket.create_connection((proxy.host, proxy.port), timeout=5)
    sock.settimeout(5)
    return sock


def _echo(sock: socket.socket, payload: bytes) -> bytes:
    sock.sendall(payload)
    got = b""
    while len(got) < len(payload):
        chunk = sock.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def test_forwards_bytes_unchanged(echo_port: int) -> None:
    with TcpProxy("127.0.0.1", echo_port) as proxy, _connect(proxy) as sock:
        payload = bytes(range(256)) * 1000
        assert _echo(sock, payload) == payload
        assert proxy.connection_count == 1
        assert proxy.address == f"127.0.0.1:{proxy.port}"


def test_delay_applies_to_each_direction(echo_port: int) -> None:
    with TcpProxy("127.0.0.1", echo_port) as proxy, _connect(proxy) as sock:
        proxy.delay_ms = 150
        began = time.monotonic()
        assert _echo(sock, b"ping") == b"ping"
        # One chunk each way, each held back 150 ms.
        assert time.monotonic() - began >= 0.3


def test_pause_holds_traffic_until_resume(echo_port: int) -> None:
    with TcpProxy("127.0.0.1", echo_port) as proxy, _connect(proxy) as sock:
        proxy.pause()
        sock.sendall(b"held")
        sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            sock.recv(16)
        proxy.resume()
        sock.settimeout(5)
        assert sock.recv(16) == b"held"


def test_hold_responses_forwards_requests_but_not_responses() -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    received = threading.Event()

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            if conn.recv(16) == b"request":
                received.set()
                conn.sendall(b"response")
            conn.recv(16)  # until the proxy closes

    threading.Thread(target=serve, daemon=True).start()
    with server, TcpProxy("127.0.0.1", server.getsockname()[1]) as proxy, _connect(proxy) as sock:
        proxy.hold_responses()
        assert proxy.holding_responses and not proxy.paused
        sock.sendall(b"request")
        assert received.wait(5), "the request did not reach the server"
        sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            sock.recv(16)
        proxy.resume()
        sock.settimeout(5)
        assert sock.recv(16) == b"response"


def test_cut_resets_open_connections_and_accepts_new_ones(echo_port: int) -> None:
    with TcpProxy("127.0.0.1", echo_port) as proxy:
        with _connect(proxy) as sock:
            assert _echo(sock, b"a") == b"a"
            proxy.cut()
            with pytest.raises((ConnectionResetError, BrokenPipeError, AssertionError)):
                # A reset connection either raises or reads EOF; EOF fails the echo check.
                assert _echo(sock, b"b") == b"b"
        with _connect(proxy) as sock:
            assert _echo(sock, b"c") == b"c"


def test_cut_also_resets_a_connection_still_being_linked(
    echo_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A client accepted just before cut(), while the proxy was still dialling the target, must
    # not survive the cut: a test that cuts right after its client connected relies on it.
    with TcpProxy("127.0.0.1", echo_port) as proxy:
        dial = socket.create_connection

        def dial_then_cut(*args: object, **kwargs: object) -> socket.socket:
            upstream = dial(*args, **kwargs)  # type: ignore[arg-type]
            proxy.cut()
            return upstream

        monkeypatch.setattr(socket, "create_connection", dial_then_cut)
        # The reset can surface in connect(), send() or recv() depending on timing.
        with (
            pytest.raises((ConnectionResetError, BrokenPipeError, AssertionError)),
            _connect(proxy) as sock,
        ):
            assert _echo(sock, b"a") == b"a"


def test_refuse_new_closes_new_connections(echo_port: int) -> None:
    with TcpProxy("127.0.0.1", echo_port) as proxy, _connect(proxy) as first:
        # The kernel completes the handshake before the proxy accepts: make sure it has.
        assert _echo(first, b"first") == b"first"
        proxy.refuse_new = True
        # The reset can surface in connect(), send() or recv() depending on timing.
        with (
            pytest.raises((ConnectionResetError, BrokenPipeError, AssertionError)),
            _connect(proxy) as second,
        ):
            assert _echo(second, b"x") == b"x"
        assert _echo(first, b"still") == b"still"


def test_close_stops_every_thread(echo_port: int) -> None:
    proxy = TcpProxy("127.0.0.1", echo_port)
    socks = [_connect(proxy) for _ in range(3)]
    for sock in socks:
        assert _echo(sock, b"x") == b"x"
    proxy.close()
    proxy.close()  # idempotent
    for sock in socks:
        sock.close()
    prefix = f"tcp-proxy-{proxy.port}-"
    assert not [t.name for t in threading.enumerate() if t.name.startswith(prefix)]
    assert proxy.connection_count == 0
