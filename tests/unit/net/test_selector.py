"""Selector over real loopback sockets: connect, bytes both ways, send tokens, wakeup, errors."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafka_sink.net.selector import PollResult, Selector, resolve


@pytest.fixture
def selector() -> Iterator[Selector]:
    sel = Selector()
    yield sel
    sel.close_all()


@pytest.fixture
def server() -> Iterator[socket.socket]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    srv.settimeout(5)
    yield srv
    srv.close()


def _poll_until(sel: Selector, pred: object, timeout_s: float = 5.0) -> PollResult:
    """Poll, merging results, until ``pred(merged)`` holds."""
    merged = PollResult()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        r = sel.poll(50)
        merged.connected += r.connected
        merged.disconnected += r.disconnected
        merged.received += r.received
        merged.sent += r.sent
        if pred(merged):  # type: ignore[operator]
            return merged
    raise AssertionError(f"condition not reached: {merged}")


def test_resolve_returns_tcp_addresses() -> None:
    addresses = resolve("127.0.0.1", 9092)
    assert addresses == [(socket.AF_INET, ("127.0.0.1", 9092))]
    with pytest.raises(OSError):
        resolve("no-such-host.invalid", 9092)


def test_connect_send_receive_and_tokens(selector: Selector, server: socket.socket) -> None:
    port = server.getsockname()[1]
    selector.connect(1, (socket.AF_INET, ("127.0.0.1", port)))
    # Bytes queued while connecting go out once connected.
    selector.send(1, b"hello ", token=None)
    selector.send(1, b"world", token=42)
    peer, _ = server.accept()
    with peer:
        result = _poll_until(selector, lambda r: r.connected and r.sent)
        assert result.connected == [1]
        assert result.sent == [(1, 42)]
        assert selector.is_connected(1)
        peer.settimeout(5)
        data = b""
        while len(data) < 11:
            data += peer.recv(100)
        assert data == b"hello world"
        peer.sendall(b"x" * 100_000)
        result = _poll_until(selector, lambda r: sum(len(d) for _, d in r.received) >= 100_000)
        assert b"".join(d for _, d in result.received) == b"x" * 100_000
    # Peer closed: reported once, with no error (clean EOF).
    result = _poll_until(selector, lambda r: r.disconnected)
    assert result.disconnected == [(1, None)]
    assert not selector.has_channel(1)


def test_refused_connect_is_reported_as_a_disconnect(selector: Selector) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    selector.connect(3, (socket.AF_INET, ("127.0.0.1", port)))
    result = _poll_until(selector, lambda r: r.disconnected)
    [(conn_id, error)] = result.disconnected
    assert conn_id == 3
    assert isinstance(error, ConnectionRefusedError) or (
        isinstance(error, OSError) and "refused" in str(error).lower()
    )
    assert result.connected == []


def test_close_by_caller_is_not_reported(selector: Selector, server: socket.socket) -> None:
    port = server.getsockname()[1]
    selector.connect(1, (socket.AF_INET, ("127.0.0.1", port)))
    _poll_until(selector, lambda r: r.connected)
    selector.close(1)
    assert selector.poll(0) == PollResult()
    assert not selector.has_channel(1)
    # The id is free again.
    selector.connect(1, (socket.AF_INET, ("127.0.0.1", port)))
    _poll_until(selector, lambda r: r.connected == [1])


def test_wakeup_interrupts_a_blocking_poll(selector: Selector) -> None:
    timer = threading.Timer(0.1, selector.wakeup)
    started = time.monotonic()
    timer.start()
    selector.poll(10_000)
    timer.join()
    assert time.monotonic() - started < 5  # returned long before its 10 s timeout


def test_wakeup_after_close_is_harmless() -> None:
    sel = Selector()
    sel.close_all()
    sel.wakeup()
    with pytest.raises(RuntimeError):
        sel.poll(0)


def test_duplicate_channel_id_is_refused(selector: Selector, server: socket.socket) -> None:
    address = (socket.AF_INET, ("127.0.0.1", server.getsockname()[1]))
    selector.connect(1, address)
    with pytest.raises(ValueError, match="already exists"):
        selector.connect(1, address)


# ------------------------------------------------------------------------------------ TLS


def _make_certs(directory: Path) -> tuple[Path, Path, Path]:
    """(ca.pem, server.pem, server.key) for 127.0.0.1 / localhost, made with openssl."""
    if shutil.which("openssl") is None:
        pytest.fail("openssl is needed to make test certificates", pytrace=False)

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    run("req", "-x509", *ec, "-days", "2", "-subj", "/CN=test-ca",
        "-keyout", "ca.key", "-out", "ca.pem")  # fmt: skip
    run("req", *ec, "-subj", "/CN=localhost", "-keyout", "server.key", "-out", "server.csr")
    (directory / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-extfile", "ext.cnf", "-out", "server.pem")  # fmt: skip
    return directory / "ca.pem", directory / "server.pem", directory / "server.key"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    return _make_certs(tmp_path_factory.mktemp("tls"))


def _tls_upper_server(certfile: Path, keyfile: Path) -> tuple[socket.socket, threading.Thread]:
    """Accepts one TLS client, answers every chunk upper-cased until the client leaves."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certfile, keyfile)
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    srv.settimeout(10)

    def serve() -> None:
        try:
            raw, _ = srv.accept()
            with context.wrap_socket(raw, server_side=True) as conn:
                while data := conn.recv(65536):
                    conn.sendall(data.upper())
        except (OSError, ssl.SSLError):
            pass  # the failing-handshake test ends here

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return srv, thread


def test_tls_handshake_and_echo(selector: Selector, certs: tuple[Path, Path, Path]) -> None:
    ca, cert, key = certs
    srv, thread = _tls_upper_server(cert, key)
    with srv:
        context = ssl.create_default_context(cafile=str(ca))
        port = srv.getsockname()[1]
        selector.connect(
            1,
            (socket.AF_INET, ("127.0.0.1", port)),
            ssl_context=context,
            server_hostname="127.0.0.1",
        )
        selector.send(1, b"hello over tls " * 2000, token=5)  # queued until the handshake ends
        expected = b"HELLO OVER TLS " * 2000
        result = _poll_until(
            selector, lambda r: sum(len(d) for _, d in r.received) >= len(expected)
        )
        assert result.connected == [1]
        assert result.sent == [(1, 5)]
        assert b"".join(d for _, d in result.received) == expected
        selector.close(1)
        thread.join(5)


def test_tls_untrusted_certificate_is_a_disconnect(
    selector: Selector, certs: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    _ca, cert, key = certs
    other_ca, _, _ = _make_certs(tmp_path)
    srv, thread = _tls_upper_server(cert, key)
    with srv:
        context = ssl.create_default_context(cafile=str(other_ca))
        selector.connect(
            1,
            (socket.AF_INET, ("127.0.0.1", srv.getsockname()[1])),
            ssl_context=context,
            server_hostname="127.0.0.1",
        )
        result = _poll_until(selector, lambda r: r.disconnected)
        [(conn_id, error)] = result.disconnected
        assert conn_id == 1
        assert isinstance(error, ssl.SSLCertVerificationError)
        assert result.connected == []
        thread.join(5)
