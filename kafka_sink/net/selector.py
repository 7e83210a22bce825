"""Non-blocking sockets multiplexed over :class:`selectors.DefaultSelector`.

This is the only module that touches sockets, and it knows nothing about Kafka: it moves opaque
bytes between channels (identified by an integer id chosen by the caller) and the network, and
reports what happened during one :meth:`Selector.poll`: channels that finished connecting, channels
that were lost (with the ``OSError`` that killed them), bytes that arrived, and send tokens whose
bytes have all been handed to the kernel.

Invariants:

- Only the thread that calls :meth:`poll` may call the other methods, except :meth:`wakeup`, which
  any thread may call at any time (even after :meth:`close`). ``wakeup`` writes one byte into a
  socketpair whose read end is part of the selector, so a blocked ``poll`` returns at once.
- A channel is reported in ``connected`` at most once, after the TCP connect (and TLS handshake,
  when a context was given) succeeded, and in ``disconnected`` at most once, after which its id is
  free again. :meth:`close` by the caller is not reported.
- Bytes passed to :meth:`send` go out in call order; a send's token is reported only after its
  last byte was written. Bytes queued on a channel that is lost are dropped (the caller decides what
  that means for its requests).
- Time is not this module's business: connection-setup and request timeouts live with the caller,
  who closes a channel that took too long.
"""

from __future__ import annotations

import contextlib
import errno
import selectors
import socket
import ssl
from collections import deque
from dataclasses import dataclass, field

__all__ = ["Address", "PollResult", "Selector", "resolve"]

# One recv() per readiness event reads at most this much; large enough that a busy connection is
# drained in few system calls, small enough not to hold the GIL for long copies.
_RECV_CHUNK = 256 * 1024

Address = tuple[int, tuple[object, ...]]
"""``(family, sockaddr)`` as returned by :func:`resolve`."""


def resolve(host: str, port: int) -> list[Address]:
    """All TCP addresses of ``host:port`` (IPv4 and IPv6, resolver order, duplicates removed).

    Raises ``OSError`` (``socket.gaierror``) when the name does not resolve.
    """
    seen: set[tuple[int, tuple[object, ...]]] = set()
    out: list[Address] = []
    for family, _type, _proto, _canon, sockaddr in socket.getaddrinfo(
        host, port, 0, socket.SOCK_STREAM, socket.IPPROTO_TCP
    ):
        if family not in (socket.AF_INET, socket.AF_INET6):
            continue
        addr: Address = (int(family), tuple(sockaddr))
        if addr not in seen:
            seen.add(addr)
            out.append(addr)
    if not out:
        raise socket.gaierror(f"no TCP address for {host}:{port}")
    return out


@dataclass
class PollResult:
    """What happened during one :meth:`Selector.poll`."""

    connected: list[int] = field(default_factory=list)
    disconnected: list[tuple[int, OSError | None]] = field(default_factory=list)
    received: list[tuple[int, bytes]] = field(default_factory=list)
    sent: list[tuple[int, int]] = field(default_factory=list)


_CONNECTING = 0
_HANDSHAKING = 1
_CONNECTED = 2


class _Channel:
    __slots__ = ("conn_id", "events", "out", "server_hostname", "sock", "ssl_context", "state")

    def __init__(
        self,
        conn_id: int,
        sock: socket.socket,
        ssl_context: ssl.SSLContext | None,
        server_hostname: str | None,
    ) -> None:
        self.conn_id = conn_id
        self.sock: socket.socket = sock
        self.ssl_context = ssl_context
        self.server_hostname = server_hostname
        self.state = _CONNECTING
        self.events = 0
        # (remaining bytes, token) in send order; the token is reported once its bytes are gone.
        self.out: deque[tuple[memoryview, int | None]] = deque()


class Selector:
    """Non-blocking TCP (optionally TLS) channels keyed by caller-chosen integer ids."""

    def __init__(self) -> None:
        self._selector = selectors.DefaultSelector()
        self._channels: dict[int, _Channel] = {}
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._closed = False
        # Events found outside select() (immediate connects, writes done in send()) are kept
        # until the next poll so that every event is reported by poll and by poll only.
        self._pending = PollResult()

    # ------------------------------------------------------------------ channel lifecycle

    def connect(
        self,
        conn_id: int,
        address: Address,
        *,
        send_buffer_bytes: int = -1,
        receive_buffer_bytes: int = -1,
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
    ) -> None:
        """Start a non-blocking connect; the outcome is reported by a later :meth:`poll`.

        ``send_buffer_bytes`` / ``receive_buffer_bytes`` of -1 keep the OS defaults. Raises
        ``OSError`` only for failures detected before any network traffic (e.g. no such address
        family); refusals and unreachable hosts arrive as ``disconnected`` events.
        """
        if conn_id in self._channels:
            raise ValueError(f"channel {conn_id} already exists")
        family, sockaddr = address
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            if send_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer_bytes)
            if receive_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer_bytes)
            rc = sock.connect_ex(sockaddr)
        except OSError:
            sock.close()
            raise
        channel = _Channel(conn_id, sock, ssl_context, server_hostname)
        self._channels[conn_id] = channel
        if rc in (0, errno.EISCONN):
            self._on_tcp_connected(channel)
        elif rc in (errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY):
            self._set_events(channel, selectors.EVENT_WRITE)
        else:
            self._lose(channel, OSError(rc, errno.errorcode.get(rc, "connect failed")))

    def close(self, conn_id: int) -> None:
        """Close a channel at the caller's request (not reported as a disconnect)."""
        channel = self._channels.pop(conn_id, None)
        if channel is not None:
            self._close_socket(channel)
        self._pending.connected = [c for c in self._pending.connected if c != conn_id]
        self._pending.received = [r for r in self._pending.received if r[0] != conn_id]
        self._pending.sent = [s for s in self._pending.sent if s[0] != conn_id]
        self._pending.disconnected = [d for d in self._pending.disconnected if d[0] != conn_id]

    def is_connected(self, conn_id: int) -> bool:
        channel = self._channels.get(conn_id)
        return channel is not None and channel.state == _CONNECTED

    def has_channel(self, conn_id: int) -> bool:
        return conn_id in self._channels

    def channel_ids(self) -> list[int]:
        return list(self._channels)

    def pending_send_bytes(self, conn_id: int) -> int:
        channel = self._channels.get(conn_id)
        if channel is None:
            return 0
        return sum(len(view) for view, _token in channel.out)

    # ------------------------------------------------------------------ data

    def send(self, conn_id: int, data: bytes, token: int | None = None) -> None:
        """Queue ``data`` on a channel; ``token`` (if any) is reported in ``sent`` once written.

        Bytes may be queued while the channel is still connecting; they go out once it is up.
        Raises ``KeyError`` for an unknown channel.
        """
        channel = self._channels[conn_id]
        if not data:
            if token is not None:
                self._pending.sent.append((conn_id, token))
            return
        channel.out.append((memoryview(data), token))
        if channel.state == _CONNECTED:
            # Writing right away saves a select() round trip on the common, uncongested path.
            self._write(channel, self._pending)

    def wakeup(self) -> None:
        """Make a blocked or upcoming :meth:`poll` return promptly. Safe from any thread."""
        with contextlib.suppress(OSError):
            # A full socketpair already guarantees a wakeup; a closed one means nobody polls.
            self._wake_w.send(b"\x00")

    def poll(self, timeout_ms: int) -> PollResult:
        """Wait up to ``timeout_ms`` (0 = don't block) for I/O, perform it, and report it."""
        if self._closed:
            raise RuntimeError("selector is closed")
        result, self._pending = self._pending, PollResult()
        has_pending = bool(
            result.connected or result.disconnected or result.received or result.sent
        )
        timeout_s = 0.0 if has_pending else max(timeout_ms, 0) / 1000.0
        # Data already decrypted inside an SSL object never makes the socket readable again.
        if any(
            isinstance(ch.sock, ssl.SSLSocket) and ch.state == _CONNECTED and ch.sock.pending()
            for ch in self._channels.values()
        ):
            timeout_s = 0.0
        try:
            ready = self._selector.select(timeout_s)
        except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for safety
            ready = []
        for key, mask in ready:
            conn_id = key.data
            if conn_id is None:
                self._drain_wakeup()
                continue
            channel = self._channels.get(conn_id)
            if channel is None or channel.sock is not key.fileobj:
                continue
            self._handle_events(channel, mask, result)
        for channel in list(self._channels.values()):
            if (
                isinstance(channel.sock, ssl.SSLSocket)
                and channel.state == _CONNECTED
                and channel.sock.pending()
            ):
                self._read(channel, result)
        return result

    def close_all(self) -> None:
        """Close every channel and the selector itself; :meth:`wakeup` stays harmless."""
        for conn_id in list(self._channels):
            self.close(conn_id)
        if not self._closed:
            self._closed = True
            self._selector.close()
            self._wake_r.close()
            self._wake_w.close()

    # ------------------------------------------------------------------ internals

    def _handle_events(self, channel: _Channel, mask: int, result: PollResult) -> None:
        if channel.state == _CONNECTING:
            err = channel.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err != 0:
                self._lose(channel, OSError(err, errno.errorcode.get(err, "connect failed")))
                self._flush_pending_into(result)
                return
            self._on_tcp_connected(channel)
            self._flush_pending_into(result)
            return
        if channel.state == _HANDSHAKING:
            self._handshake(channel)
            self._flush_pending_into(result)
            return
        if mask & selectors.EVENT_WRITE:
            self._write(channel, result)
        if mask & selectors.EVENT_READ and channel.conn_id in self._channels:
            self._read(channel, result)

    def _flush_pending_into(self, result: PollResult) -> None:
        pending, self._pending = self._pending, PollResult()
        result.connected.extend(pending.connected)
        result.disconnected.extend(pending.disconnected)
        result.received.extend(pending.received)
        result.sent.extend(pending.sent)

    def _on_tcp_connected(self, channel: _Channel) -> None:
        if channel.ssl_context is not None:
            # Wrapping detaches the file descriptor into a new socket object, so the old one
            # leaves the selector first. It must happen after the TCP connect: an SSLSocket
            # made from an unconnected socket has no SSL object to handshake with.
            self._set_events(channel, 0)
            try:
                channel.sock = channel.ssl_context.wrap_socket(
                    channel.sock,
                    server_hostname=channel.server_hostname,
                    do_handshake_on_connect=False,
                )
            except OSError as exc:
                self._lose(channel, exc)
                return
            channel.state = _HANDSHAKING
            self._handshake(channel)
        else:
            self._on_ready(channel)

    def _handshake(self, channel: _Channel) -> None:
        sock = channel.sock
        assert isinstance(sock, ssl.SSLSocket)
        try:
            sock.do_handshake()
        except ssl.SSLWantReadError:
            self._set_events(channel, selectors.EVENT_READ)
            return
        except ssl.SSLWantWriteError:
            self._set_events(channel, selectors.EVENT_WRITE)
            return
        except OSError as exc:  # ssl.SSLError (incl. certificate errors) is an OSError
            self._lose(channel, exc)
            return
        self._on_ready(channel)

    def _on_ready(self, channel: _Channel) -> None:
        channel.state = _CONNECTED
        self._pending.connected.append(channel.conn_id)
        self._set_events(channel, selectors.EVENT_READ)
        if channel.out:
            self._write(channel, self._pending)

    def _write(self, channel: _Channel, result: PollResult) -> None:
        sock = channel.sock
        while channel.out:
            view, token = channel.out[0]
            try:
                n = sock.send(view)
            except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
                break
            except OSError as exc:
                self._lose(channel, exc, result)
                return
            if n < len(view):
                channel.out[0] = (view[n:], token)
                break
            channel.out.popleft()
            if token is not None:
                result.sent.append((channel.conn_id, token))
        wanted = selectors.EVENT_READ | (selectors.EVENT_WRITE if channel.out else 0)
        self._set_events(channel, wanted)

    def _read(self, channel: _Channel, result: PollResult) -> None:
        sock = channel.sock
        chunks: list[bytes] = []
        while True:
            try:
                data = sock.recv(_RECV_CHUNK)
            except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                break
            except OSError as exc:
                if chunks:
                    result.received.append((channel.conn_id, b"".join(chunks)))
                self._lose(channel, exc, result)
                return
            if not data:
                if chunks:
                    result.received.append((channel.conn_id, b"".join(chunks)))
                self._lose(channel, None, result)
                return
            chunks.append(data)
            # Plain sockets: one recv per readiness keeps poll fair across channels. TLS sockets
            # must be drained of what OpenSSL already decrypted.
            if not (isinstance(sock, ssl.SSLSocket) and sock.pending()):
                break
        if chunks:
            result.received.append((channel.conn_id, b"".join(chunks)))

    def _set_events(self, channel: _Channel, events: int) -> None:
        if events == channel.events:
            return
        if channel.events == 0:
            self._selector.register(channel.sock, events, channel.conn_id)
        elif events == 0:
            self._selector.unregister(channel.sock)
        else:
            self._selector.modify(channel.sock, events, channel.conn_id)
        channel.events = events

    def _lose(
        self, channel: _Channel, exc: OSError | None, result: PollResult | None = None
    ) -> None:
        self._channels.pop(channel.conn_id, None)
        self._close_socket(channel)
        (result or self._pending).disconnected.append((channel.conn_id, exc))

    def _close_socket(self, channel: _Channel) -> None:
        if channel.events:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._selector.unregister(channel.sock)
            channel.events = 0
        channel.out.clear()
        with contextlib.suppress(OSError):
            channel.sock.close()

    def _drain_wakeup(self) -> None:
        with contextlib.suppress(BlockingIOError, InterruptedError, OSError):
            while self._wake_r.recv(4096):
                pass

    def __repr__(self) -> str:
        return f"Selector(channels={sorted(self._channels)})"
