"""One blocking HTTP(S) exchange with a bounded time, for the driver's REST clients.

Role: the socket and TLS side of clients that speak HTTP rather than Kafka's protocol (the
Schema Registry client in ``kafka_sink.spark.formats.registry``), kept in ``net`` because this is
the only package that opens connections. The caller builds the request; :func:`exchange` sends
it with ``urllib.request`` and hands back the status and body, or raises
:class:`HttpTransportError` when no response came.

- :class:`HttpTlsConfig`: PEM locations as confluent-kafka's ``SchemaRegistryClient`` names them
  (``ssl.ca.location``, ``ssl.certificate.location``, ``ssl.key.location``) plus the key's
  password, turned into an ``ssl.SSLContext`` once; the server's certificate and host name are
  always verified (the system CAs when no CA is given).
- :class:`HttpResponse`: any status the server answered with, 4xx and 5xx included: what they
  mean is the caller's protocol, not transport.

Invariants:
- Every exchange is bounded by ``timeout_ms`` (connect, and each blocking read).
- Credentials go in ``secret_headers``, which urllib never forwards on a redirect, and appear in
  no ``repr``, log or exception text; a transport error names the URL it was given (which the
  caller strips of user info) and the reason, never a header.
- Nothing here retries: the caller decides which failures are worth another URL or another try.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field

from kafka_sink.errors import ConfigError

__all__ = ["HttpResponse", "HttpTlsConfig", "HttpTransportError", "exchange"]


class HttpTransportError(Exception):
    """No HTTP response: refused, unreachable, timed out, or the TLS handshake failed."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"{url}: {reason}")
        self.url = url
        self.reason = reason


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


def exchange(
    method: str,
    url: str,
    *,
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    secret_headers: Mapping[str, str] | None = None,
    timeout_ms: int,
    context: ssl.SSLContext | None = None,
) -> HttpResponse:
    """Send one request and return the response, whatever its status; bounded by ``timeout_ms``."""
    request = urllib.request.Request(url, data=body, method=method)
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    for name, value in (secret_headers or {}).items():
        request.add_unredirected_header(name, value)
    timeout_s = timeout_ms / 1000.0
    try:
        with urllib.request.urlopen(request, timeout=timeout_s, context=context) as reply:
            return HttpResponse(
                int(reply.status), reply.read(), reply.headers.get("Content-Type", "")
            )
    except urllib.error.HTTPError as exc:
        try:
            data = exc.read()
        except OSError:
            data = b""
        finally:
            exc.close()
        return HttpResponse(int(exc.code), data, exc.headers.get("Content-Type", "") or "")
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        raise HttpTransportError(url, _reason(exc)) from None
