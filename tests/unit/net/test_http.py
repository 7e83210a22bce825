"""One HTTP exchange against real loopback peers: a whole-call deadline and a body cap.

The peers (``tests.fakes.http_peer``) send their answer one byte per 0.5 s, or a body larger
than the cap; each test asserts when the exchange ended and what it raised.
"""

from __future__ import annotations

import ssl
import time

import pytest

from kafka_sink.net.http import HttpBodyTooLargeError, HttpTransportError, exchange
from tests.fakes.http_peer import ENDLESS_HEAD, response_head, serving

MIB = 1024 * 1024
MARGIN_S = 0.75

DRIPPING = {
    "headers": (b"", ENDLESS_HEAD),
    "body": (response_head(length=20_000), b"{" * 20_000),
    "chunked body": (response_head(), b"4e20\r\n" + b"{" * 20_000),
    "error body": (response_head(503, length=20_000), b"x" * 20_000),
}


@pytest.mark.parametrize("phase", sorted(DRIPPING))
def test_a_peer_dripping_its_answer_is_cut_at_the_whole_call_deadline(phase: str) -> None:
    head, drip = DRIPPING[phase]
    with serving(head, drip, interval_s=0.5) as peer:
        began = time.monotonic()
        with pytest.raises(HttpTransportError, match="timed out") as caught:
            exchange("GET", peer.url + "/x", timeout_ms=1000, max_body_bytes=MIB)
        took = time.monotonic() - began
    assert 0.9 < took < 1.0 + MARGIN_S
    assert caught.value.url == peer.url + "/x"


def test_a_peer_that_never_answers_is_cut_at_the_deadline() -> None:
    with serving(b"", b" ", interval_s=10.0) as peer:
        began = time.monotonic()
        with pytest.raises(HttpTransportError, match="timed out"):
            exchange("POST", peer.url, body=b"{}", timeout_ms=500, max_body_bytes=MIB)
        assert time.monotonic() - began < 0.5 + MARGIN_S


def test_a_body_within_the_cap_comes_back_whole() -> None:
    body = bytes(range(256)) * (MIB // 256)
    assert len(body) == MIB
    with serving(response_head(length=len(body)) + body) as peer:
        answer = exchange("GET", peer.url, timeout_ms=5000, max_body_bytes=MIB)
    assert (answer.status, answer.body, answer.content_type) == (200, body, "application/json")
    assert peer.requests[0].startswith(b"GET / HTTP/1.1\r\n")


@pytest.mark.parametrize("status", [200, 500])
def test_an_announced_body_past_the_cap_is_refused_without_reading_it(status: int) -> None:
    # 400 MiB announced, none of it sent: the refusal cannot have waited for the body.
    with serving(response_head(status, length=400 * MIB), b" " * 100, interval_s=5.0) as peer:
        began = time.monotonic()
        with pytest.raises(HttpBodyTooLargeError, match=f"larger than {MIB} bytes") as caught:
            exchange("GET", peer.url, timeout_ms=3000, max_body_bytes=MIB)
        assert time.monotonic() - began < 1.0
    assert caught.value.max_body_bytes == MIB and caught.value.url == peer.url


def test_a_chunked_body_past_the_cap_stops_being_read_at_the_cap() -> None:
    chunk = b"f" * 65536
    stream = (b"10000\r\n" + chunk + b"\r\n") * 64  # 4 MiB, never finished
    with serving(response_head() + stream) as peer, pytest.raises(HttpBodyTooLargeError):
        exchange("GET", peer.url, timeout_ms=5000, max_body_bytes=MIB)


def test_a_redirects_body_counts_against_the_connections_cap() -> None:
    location = "Location: /elsewhere\r\n"
    stream = (b"10000\r\n" + b"r" * 65536 + b"\r\n") * 64
    with (
        serving(response_head(302, extra=location) + stream) as peer,
        pytest.raises(HttpBodyTooLargeError),
    ):
        exchange("GET", peer.url, timeout_ms=5000, max_body_bytes=64 * 1024)


def test_a_refused_connection_is_a_transport_error_naming_the_url() -> None:
    with serving(b"") as peer:
        url = peer.url
    with pytest.raises(HttpTransportError, match="refused") as caught:
        exchange("GET", url + "/p", timeout_ms=1000, max_body_bytes=MIB)
    assert str(caught.value).startswith(url + "/p: ")


def test_a_tls_handshake_dripped_by_the_peer_is_cut_at_the_deadline() -> None:
    # A TLS record header announcing 16 KiB of handshake, then its bytes one at a time.
    record = b"\x16\x03\x03\x40\x00" + b"\x00" * 16_384
    with serving(b"", record, interval_s=0.5, read_request=False) as peer:
        url = peer.url.replace("http://", "https://")
        began = time.monotonic()
        with pytest.raises(HttpTransportError, match="timed out"):
            exchange(
                "GET",
                url,
                timeout_ms=1000,
                max_body_bytes=MIB,
                context=ssl.create_default_context(),
            )
        assert time.monotonic() - began < 1.0 + MARGIN_S
