"""A TCP fault-injection proxy for network tests: delay, pause or cut traffic to one endpoint.

``TcpProxy(target_host, target_port)`` listens on 127.0.0.1 (port chosen by the OS) and forwards
every accepted connection to the target, one thread per direction. Faults:

- ``delay_ms``: every chunk waits this long before it is forwarded (both directions);
- ``pause()`` / ``resume()``: forwarding stops (bytes stay buffered in the kernel and in the
  proxy) without closing anything, as with a stalled network; new connections are still accepted;
- ``hold_responses()``: only the broker-to-client direction stops: requests still reach the
  broker, which handles them, but no response comes back until ``resume()`` (the "written, then
  the connection dropped before the response" case);
- ``cut()``: every open connection is reset (both sides); new connections are accepted again;
- ``refuse_new``: while true, new connections are accepted then closed at once.

Invariants: only 127.0.0.1 is used, for listening and (by construction of the tests) as the
target; ``close()`` stops the acceptor and every pump thread and closes every socket, and is
idempotent; faults change forwarding only, never the byte stream's content or order.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import threading
import time
from types import TracebackType

_CHUNK = 65536
_POLL_S = 0.05


class _Link:
    """One proxied connection: a client socket and its upstream socket."""

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream
        self.closed = threading.Event()

    def close(self, *, reset: bool = False) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        for sock in (self.client, self.upstream):
            if reset:
                # SO_LINGER 0: close() sends RST, so the peer sees a hard failure, not a clean EOF.
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()


class TcpProxy:
    """Forward 127.0.0.1:<port> to ``target_host:target_port`` with injectable faults."""

    def __init__(self, target_host: str, target_port: int, *, listen_port: int = 0) -> None:
        self.target_host = target_host
        self.target_port = target_port
        self.delay_ms = 0
        self.refuse_new = False
        self._running = threading.Event()  # set = forwarding, clear = paused
        self._running.set()
        self._responses = threading.Event()  # set = forwarding broker-to-client bytes
        self._responses.set()
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._links: set[_Link] = set()
        self._threads: list[threading.Thread] = []
        self._accepted = 0
        # Counts cut() calls: a connection accepted before a cut but still being linked to the
        # target while it ran is reset too (else it would survive the cut).
        self._cuts = 0
        self._server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", listen_port))
        self._server.listen(64)
        self._server.settimeout(_POLL_S)
        self.host, self.port = self._server.getsockname()[:2]
        self._acceptor = threading.Thread(
            target=self._accept_loop, name=f"tcp-proxy-{self.port}-accept", daemon=True
        )
        self._acceptor.start()

    # -- public API ------------------------------------------------------------------------
    @property
    def address(self) -> str:
        """``"127.0.0.1:<port>"``, usable as a bootstrap server."""
        return f"{self.host}:{self.port}"

    @property
    def connection_count(self) -> int:
        """Connections currently open through the proxy."""
        with self._lock:
            return sum(1 for link in self._links if not link.closed.is_set())

    @property
    def accepted_count(self) -> int:
        """Connections accepted since the proxy started (including refused ones)."""
        with self._lock:
            return self._accepted

    def pause(self) -> None:
        """Stop forwarding in both directions, keeping every connection open."""
        self._running.clear()

    def hold_responses(self) -> None:
        """Stop forwarding broker-to-client bytes only; requests keep flowing to the broker."""
        self._responses.clear()

    def resume(self) -> None:
        self._running.set()
        self._responses.set()

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    @property
    def holding_responses(self) -> bool:
        return not self._responses.is_set()

    def cut(self) -> None:
        """Reset every open connection; the proxy keeps accepting new ones."""
        with self._lock:
            self._cuts += 1
            links = list(self._links)
            self._links.clear()
        for link in links:
            link.close(reset=True)

    def close(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        self._running.set()  # wake paused pumps so they can see the stop
        self._responses.set()
        with contextlib.suppress(OSError):
            self._server.close()
        self.cut()
        self._acceptor.join(timeout=5)
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout=5)

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"TcpProxy({self.address} -> {self.target_host}:{self.target_port}, "
            f"delay_ms={self.delay_ms}, paused={self.paused})"
        )

    # -- internals -------------------------------------------------------------------------
    def _accept_loop(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self._accepted += 1
                cuts_at_accept = self._cuts
            if self.refuse_new:
                _Link(client, socket.socket()).close(reset=True)
                continue
            try:
                upstream = socket.create_connection((self.target_host, self.target_port), timeout=5)
            except OSError:
                _Link(client, socket.socket()).close(reset=True)
                continue
            for sock in (client, upstream):
                sock.setblocking(True)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = _Link(client, upstream)
            with self._lock:
                if self._stopped.is_set():
                    link.close()
                    return
                if self._cuts != cuts_at_accept:
                    link.close(reset=True)
                    continue
                self._links.add(link)
                for src, dst, name, gate in (
                    (client, upstream, "up", self._running),
                    (upstream, client, "down", self._responses),
                ):
                    thread = threading.Thread(
                        target=self._pump,
                        args=(link, src, dst, gate),
                        name=f"tcp-proxy-{self.port}-{name}",
                        daemon=True,
                    )
                    self._threads.append(thread)
                    thread.start()
                self._threads = [t for t in self._threads if t.is_alive()]

    def _pump(
        self, link: _Link, src: socket.socket, dst: socket.socket, gate: threading.Event
    ) -> None:
        """Forward ``src`` to ``dst`` while the proxy runs and ``gate`` (the direction) is open."""
        with selectors.DefaultSelector() as sel:
            try:
                sel.register(src, selectors.EVENT_READ)
            except (OSError, ValueError):
                link.close()
                return
            while not link.closed.is_set():
                # While paused nothing is read, so the kernel buffers fill and the sender stalls
                # exactly as it would on a frozen network path.
                if not self._running.wait(_POLL_S) or not gate.wait(_POLL_S):
                    continue
                try:
                    if not sel.select(_POLL_S):
                        continue
                    data = src.recv(_CHUNK)
                except (OSError, ValueError):
                    break
                if not data:
                    break
                delay_ms = self.delay_ms
                if delay_ms > 0:
                    time.sleep(delay_ms / 1000.0)
                while not (self._running.is_set() and gate.is_set()) and not link.closed.is_set():
                    self._running.wait(_POLL_S)
                    gate.wait(_POLL_S)
                try:
                    dst.sendall(data)
                except (OSError, ValueError):
                    break
        link.close()
        with self._lock:
            self._links.discard(link)
