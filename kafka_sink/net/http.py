"""One blocking HTTP(S) exchange bounded in time and in size, for the driver's outside calls.

Role: the socket and TLS side of clients that speak HTTP rather than Kafka's protocol (the
Schema Registry client in ``kafka_sink.formats.registry``, the Pushgateway push in
``kafka_sink.spark.metrics.prometheus``), kept in ``net`` because this is the only package that
opens connections. The caller builds the request; :func:`exchange` sends it with
``urllib.request`` and hands back the status and body, or raises :class:`HttpTransportError`
when no whole response came in time.

- :class:`HttpTlsConfig`: PEM locations as confluent-kafka's ``SchemaRegistryClient`` names them
  (``ssl.ca.location``, ``ssl.certificate.location``, ``ssl.key.location``) plus the key's
  password, turned into an ``ssl.SSLContext`` once; the server's certificate and host name are
  always verified (the system CAs when no CA is given).
- :class:`HttpResponse`: any status the server answered with, 4xx and 5xx included: what they
  mean is the caller's protocol, not transport.

Invariants:
- An exchange ends within ``timeout_ms`` of its start whatever the peer does: one monotonic
  deadline covers connecting, the TLS handshake, sending, the status line and headers, any
  redirect and the body, and every blocking socket call is given only the time left (a peer
  that sends one byte at a time cannot stretch it). Name resolution is the one step outside it:
  the resolver takes no timeout.
- A body is read in chunks of at most :data:`CHUNK_BYTES` and never past ``max_body_bytes``: a
  longer one (or a ``Content-Length`` announcing one) raises :class:`HttpBodyTooLargeError`
  without reading the rest. All the bytes taken from one connection (headers and a redirect's
  body included) are capped at ``max_body_bytes`` plus :data:`HEAD_BYTES`.
- Credentials go in ``secret_headers``, which urllib never forwards on a redirect, and appear in
  no ``repr``, log or exception text; a transport error names the URL it was given (which the
  caller strips of user info) and the reason, never a header.
- Nothing here retries: the caller decides which failures are worth another URL or another try.
"""

from __future__ import annotations

import functools
import http.client
import io
import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_sink.errors import ConfigError
from kafka_sink.net.tls import UNENCRYPTED_KEY, pem_key_is_encrypted

__all__ = [
    "CHUNK_BYTES",
    "HEAD_BYTES",
    "HttpBodyTooLargeError",
    "HttpResponse",
    "HttpTlsConfig",
    "HttpTransportError",
    "exchange",
]

#: The most one read of a body asks for.
CHUNK_BYTES = 64 * 1024
#: What a connection may carry besides the body: status line, headers, a redirect's body.
HEAD_BYTES = 256 * 1024


class HttpTransportError(Exception):
    """No whole HTTP response: refused, unreachable, timed out, or the TLS handshake failed."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"{url}: {reason}")
        self.url = url
        self.reason = reason


class HttpBodyTooLargeError(HttpTransportError):
    """The server answered with (or announced) a body longer than the caller's cap."""

    def __init__(self, url: str, max_body_bytes: int) -> None:
        super().__init__(url, f"the answer's body is larger than {max_body_bytes} bytes")
        self.max_body_bytes = max_body_bytes


@dataclass(frozen=True)
class HttpResponse:
    status: int
    body: bytes
    content_type: str = ""


@dataclass(frozen=True)
class HttpTlsConfig:
    """PEM files for an HTTPS client; ``repr`` never shows the key's password."""

    ca_location: str | None = None
    certificate_location: str | None = None
    key_location: str | None = None
    key_password: str | None = field(default=None, repr=False)

    def create_context(self) -> ssl.SSLContext:
        """A verifying client context; a file that does not load is a ConfigError naming it."""
        try:
            context = ssl.create_default_context(cafile=self.ca_location)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"ssl.ca.location {self.ca_location!r} did not load as PEM CA certificates "
                f"({_reason(exc)})"
            ) from None
        if self.certificate_location is not None:
            self._refuse_an_unused_key_password()
            try:
                context.load_cert_chain(
                    self.certificate_location, self.key_location, self._password
                )
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(
                    f"ssl.certificate.location {self.certificate_location!r} / ssl.key.location "
                    f"{self.key_location!r} did not load as a PEM certificate and private key "
                    f"({_reason(exc)}; an encrypted key needs ssl.key.password)"
                ) from None
        return context

    def _refuse_an_unused_key_password(self) -> None:
        """A password for a key that is not encrypted would be accepted and never used: refused,
        as Java refuses it (and as :class:`~kafka_sink.net.tls.TlsConfig` does for brokers)."""
        if self.key_password is None:
            return
        where = self.key_location or self.certificate_location
        assert where is not None
        try:
            with open(where, encoding="ascii", errors="replace") as f:
                encrypted = pem_key_is_encrypted(f.read())
        except OSError:
            return  # load_cert_chain names the file that does not load
        if encrypted is False:
            raise ConfigError(UNENCRYPTED_KEY.format(where=where))

    def _password(self) -> str:
        # A callback rather than the string: OpenSSL asks only for an encrypted key, and an
        # unencrypted key with a password set still loads (as in confluent-kafka).
        return self.key_password or ""


def _reason(exc: BaseException) -> str:
    """Why a connection or a file failed, without quoting anything the peer or file sent."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (
            f"TLS: the server's certificate was not accepted ({exc.verify_message or exc.reason})"
        )
    if isinstance(exc, ssl.SSLError):
        return f"TLS: {exc.reason or type(exc).__name__}"
    if isinstance(exc, urllib.error.URLError):
        return _reason(exc.reason) if isinstance(exc.reason, BaseException) else str(exc.reason)
    if isinstance(exc, TimeoutError | socket.timeout):
        return "timed out"
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    if isinstance(exc, http.client.HTTPException):
        return f"not an HTTP response ({type(exc).__name__})"
    return type(exc).__name__


class _OverrunError(Exception):
    """A connection carried more bytes than its cap (raised inside http.client's reads)."""


class _Deadline:
    """The monotonic end of one exchange, shared by every connection it opens (redirects)."""

    def __init__(self, timeout_s: float, max_bytes: int) -> None:
        self._end = time.monotonic() + timeout_s
        self.max_bytes = max_bytes

    def left_s(self) -> float:
        """The time left; a TimeoutError once there is none (so no socket call can start)."""
        left = self._end - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out")
        return left


class _BoundedReader(io.RawIOBase):
    """A socket's reads under the exchange's deadline and byte cap.

    ``http.client`` parses the status line and headers in many small reads, each of which a
    plain socket timeout would bound on its own; here each read gets only the time left.
    """

    def __init__(self, sock: socket.socket, raw: io.RawIOBase, deadline: _Deadline) -> None:
        super().__init__()
        self._sock = sock
        self._raw = raw
        self._deadline = deadline
        self._taken = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        self._sock.settimeout(self._deadline.left_s())
        n = self._raw.readinto(buffer)
        self._taken += n or 0
        if self._taken > self._deadline.max_bytes:
            raise _OverrunError
        return n

    def close(self) -> None:
        self._raw.close()
        super().close()


class _BoundedResponse(http.client.HTTPResponse):
    def __init__(self, sock: socket.socket, *args: Any, deadline: _Deadline, **kwargs: Any):
        super().__init__(sock, *args, **kwargs)
        raw = self.fp.detach()
        self.fp = io.BufferedReader(_BoundedReader(sock, raw, deadline))


class _BoundedConnection(http.client.HTTPConnection):
    """A connection whose every blocking step takes the time left to its exchange."""

    def __init__(self, host: str, *, deadline: _Deadline, **kwargs: Any) -> None:
        kwargs["timeout"] = deadline.left_s()
        super().__init__(host, **kwargs)
        self._deadline = deadline
        # A proxy tunnel's answer is read through response_class too.
        self.response_class = functools.partial(  # type: ignore[assignment]
            _BoundedResponse, deadline=deadline
        )

    def connect(self) -> None:
        # create_connection, and the TLS handshake in the HTTPS subclass, take self.timeout
        # as their whole bound.
        self.timeout = self._deadline.left_s()
        super().connect()

    def send(self, data: Any) -> None:
        if self.sock is not None:
            # sendall's timeout bounds the whole send, not each write.
            self.sock.settimeout(self._deadline.left_s())
        super().send(data)


class _BoundedHttpsConnection(_BoundedConnection, http.client.HTTPSConnection):
    pass


class _HttpHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_BoundedConnection, deadline=self._deadline), req)


class _HttpsHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline, context: ssl.SSLContext | None) -> None:
        super().__init__(context=context)
        self._deadline = deadline
        self._tls = context

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        connection = functools.partial(
            _BoundedHttpsConnection, deadline=self._deadline, context=self._tls
        )
        return self.do_open(connection, req)


def _read_body(reply: Any, url: str, max_body_bytes: int) -> bytes:
    """The body in bounded chunks; HttpBodyTooLargeError past ``max_body_bytes``."""
    announced = (reply.headers.get("Content-Length") or "").strip()
    if announced.isdigit() and int(announced) > max_body_bytes:
        raise HttpBodyTooLargeError(url, max_body_bytes)
    chunks: list[bytes] = []
    size = 0
    while True:
        # One byte past the cap is enough to know the body is too large.
        chunk = reply.read(min(CHUNK_BYTES, max_body_bytes + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > max_body_bytes:
            raise HttpBodyTooLargeError(url, max_body_bytes)


def exchange(
    method: str,
    url: str,
    *,
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    secret_headers: Mapping[str, str] | None = None,
    timeout_ms: int,
    max_body_bytes: int,
    context: ssl.SSLContext | None = None,
) -> HttpResponse:
    """Send one request and return the response, whatever its status.

    The whole exchange ends within ``timeout_ms``; a body longer than ``max_body_bytes`` raises
    :class:`HttpBodyTooLargeError`.
    """
    request = urllib.request.Request(url, data=body, method=method)
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    for name, value in (secret_headers or {}).items():
        request.add_unredirected_header(name, value)
    deadline = _Deadline(timeout_ms / 1000.0, max_body_bytes + HEAD_BYTES)
    opener = urllib.request.build_opener(_HttpHandler(deadline), _HttpsHandler(deadline, context))
    try:
        try:
            with opener.open(request, timeout=deadline.left_s()) as reply:
                return HttpResponse(
                    int(reply.status),
                    _read_body(reply, url, max_body_bytes),
                    reply.headers.get("Content-Type", ""),
                )
        except urllib.error.HTTPError as exc:
            try:
                data = _read_body(exc, url, max_body_bytes)
            finally:
                exc.close()
            return HttpResponse(int(exc.code), data, exc.headers.get("Content-Type", "") or "")
    except _OverrunError:
        raise HttpBodyTooLargeError(url, max_body_bytes) from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, _OverrunError):
            raise HttpBodyTooLargeError(url, max_body_bytes) from None
        raise HttpTransportError(url, _reason(exc)) from None
    except (http.client.HTTPException, OSError, ValueError) as exc:
        raise HttpTransportError(url, _reason(exc)) from None
