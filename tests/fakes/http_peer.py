"""A real HTTP peer on 127.0.0.1 that answers from a script: all at once, or one byte at a time.

For the outside calls' bounds: ``serving(head, drip=...)`` listens on a loopback port and, for
every connection, reads the request, sends ``head`` at once and then ``drip`` one byte per
``interval_s``. A peer that drips its headers (``drip=ENDLESS_HEAD``) or its body (``head`` from
:func:`response_head`, then ``drip``) is the slow server a whole-call deadline is for; a peer
sending a huge ``head`` is the large answer a size cap is for. The peer hangs up after
``give_up_s`` of dripping at the latest, so a client without a deadline ends (late, failing the
test's timing) instead of hanging the run.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

#: A status line and headers that never end: 20 000 bytes of one header's value.
ENDLESS_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Pad: " + b"a" * 20_000


def response_head(status: int = 200, *, length: int | None = None, extra: str = "") -> bytes:
    """Complete response headers, announcing ``length`` body bytes (chunked when None)."""
    framing = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    return (
        f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{framing}\r\n{extra}"
        "Connection: close\r\n\r\n"
    ).encode()


def _read_request(conn: socket.socket) -> bytes:
    """The request's head and its ``Content-Length`` body (as much as came, on a timeout)."""
    data = b""
    with contextlib.suppress(OSError):
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return data
            data += chunk
        head = data.partition(b"\r\n\r\n")[0].lower()
        length = 0
        for line in head.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip() == b"content-length":
                length = int(value)
        while len(data) - len(head) - 4 < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    return data


@dataclass
class Peer:
    url: str
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)


@contextlib.contextmanager
def serving(
    head: bytes,
    drip: bytes = b"",
    *,
    interval_s: float = 0.5,
    give_up_s: float = 8.0,
    read_request: bool = True,
) -> Iterator[Peer]:
    """``read_request=False`` answers at once, before any request (a TLS peer's handshake)."""
    stop = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    peer = Peer(f"http://127.0.0.1:{listener.getsockname()[1]}")
    threads: list[threading.Thread] = []

    def answer(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.settimeout(1.0)
            if read_request:
                peer.requests.append(_read_request(conn))
            conn.sendall(head)
            waited = 0.0
            for i in range(len(drip)):
                if waited >= give_up_s or stop.wait(interval_s):
                    return
                waited += interval_s
                conn.sendall(drip[i : i + 1])

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            peer.connections += 1
            thread = threading.Thread(target=answer, args=(conn,), daemon=True)
            threads.append(thread)
            thread.start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield peer
    finally:
        stop.set()
        acceptor.join(5)
        listener.close()
        for thread in threads:
            thread.join(5)
