"""Selector over real loopback sockets: connect, bytes both ways, send tokens, wakeup, errors."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

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
