"""Credentials in the URLs the sink is given: used as a client reads them, or refused; never shown.

``schema.registry.url``, ``metricsPushGateway`` and commit-log locations (``commitLog``, the
``report`` command's argument) against passwords holding ``/ ? # @ :``, unencoded and
percent-encoded. Passwords are marker pieces joined by those characters, so a partial leak (the
part after a ``/``) is caught as well as a whole one.
"""

from __future__ import annotations

import base64
import socket
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_sink.errors import ConfigError
from kafka_sink.formats.registry import SchemaRegistryClient, SchemaRegistryConfig
from kafka_sink.report.cli import main as report_main
from kafka_sink.sink_errors import CommitStoreError, SchemaRegistryUnavailableError, SinkOptionError
from kafka_sink.spark.commit_log.store import display_location, open_store
from kafka_sink.spark.metrics.prometheus import gateway_url, push_batch
from kafka_sink.spark.options import SinkOptions

PIECES = ("Zq1", "Xk2", "Wj3", "Vy4")
passwords = st.builds(
    lambda parts, seps: "".join(p + s for p, s in zip(parts, seps, strict=False)),
    st.lists(st.sampled_from(PIECES), min_size=1, max_size=4),
    st.lists(st.sampled_from("/?#@:"), min_size=4, max_size=4),
)
BASE = {"kafka.bootstrap.servers": "localhost:9092"}


def leaked(text: str, password: str) -> list[str]:
    return [p for p in PIECES if p in password and p in text]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# -- schema.registry.url ----------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(password=passwords, encoded=st.booleans())
def test_registry_url_passwords_are_used_whole_or_refused_and_never_shown(
    password: str, encoded: bool
) -> None:
    written = urllib.parse.quote(password, safe="") if encoded else password
    port = _closed_port()
    options = {
        "schema.registry.url": f"http://bob:{written}@127.0.0.1:{port}",
        "schema.registry.max.retries": "0",
        "schema.registry.timeout.ms": "2000",
    }
    try:
        config = SchemaRegistryConfig.from_options(options)
    except ConfigError as exc:
        assert not leaked(str(exc), password)
        assert "schema.registry.url" in str(exc) and "percent-encode" in str(exc)
        assert not encoded and any(c in password for c in "/?#")
        return
    # Accepted: the credentials are the whole password, and the URL is the host's alone.
    assert config.user_info == f"bob:{password}"
    assert config.urls == (f"http://127.0.0.1:{port}",)
    assert not leaked(repr(config), password)
    with pytest.raises(SchemaRegistryUnavailableError) as caught:
        SchemaRegistryClient(config).latest_version("s")
    assert not leaked(str(caught.value), password)


@pytest.mark.parametrize(
    "url", ["http://[::1", "http://h:99999999", "http://bob:p@", "ftp://h", "http://"]
)
def test_malformed_registry_urls_are_refused_naming_the_key(url: str) -> None:
    with pytest.raises(ConfigError, match=r"schema\.registry\.url") as caught:
        SchemaRegistryConfig.from_options({"schema.registry.url": url})
    assert type(caught.value) is ConfigError


# -- metricsPushGateway -----------------------------------------------------------------------


@pytest.fixture
def gateway() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A server answering every PUT 200 and recording its headers (a Pushgateway's part)."""
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append({k.lower(): v for k, v in self.headers.items()} | {"path": self.path})
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


SECTION = {
    "partitions": [],
    "retries": 0,
    "errors": 0,
    "requests": 0,
    "produce_latency_ms_avg": None,
    "produce_latency_ms_max": 0,
    "throttle_time_ms_sum": 0,
    "records": 0,
    "records_per_s": None,
    "compression_ratio": None,
    "commit_duration_ms": 0,
}


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(password=passwords, encoded=st.booleans())
def test_pushgateway_credentials_are_sent_as_basic_auth_or_refused(
    gateway: tuple[str, list[dict[str, str]]], password: str, encoded: bool, caplog
) -> None:
    host, seen = gateway
    seen.clear()
    written = urllib.parse.quote(password, safe="") if encoded else password
    value = f"http://bob:{written}@{host}"
    try:
        url = gateway_url(value)
    except SinkOptionError as exc:
        assert not leaked(str(exc), password)
        assert "metricsPushGateway" in str(exc) and "percent-encode" in str(exc)
        assert not encoded and any(c in password for c in "/?#")
        return
    opts = SinkOptions.from_options({**BASE, "metricsPushGateway": value})
    assert not leaked(repr(opts), password)
    assert push_batch(SECTION, gateway=url, job="j", query="q", batch_id=1)
    sent = seen[0]["authorization"]
    assert sent.startswith("Basic ")
    assert base64.b64decode(sent.split()[1]).decode() == f"bob:{password}"
    assert seen[0]["path"] == "/metrics/job/j/query/q"


def test_a_failed_push_names_the_gateway_without_its_password(caplog) -> None:
    url = gateway_url(f"http://bob:Zq1%2FXk2@127.0.0.1:{_closed_port()}")
    assert not push_batch(SECTION, gateway=url, job="j", query="q", batch_id=1)
    text = caplog.text
    assert "Pushgateway" in text and "Zq1" not in text and "Xk2" not in text


def test_a_pushgateway_without_credentials_sends_no_authorization(
    gateway: tuple[str, list[dict[str, str]]],
) -> None:
    host, seen = gateway
    assert push_batch(SECTION, gateway=gateway_url(host), job="j", query="q", batch_id=None)
    assert "authorization" not in seen[0]


# -- commit-log locations ---------------------------------------------------------------------


@given(password=passwords)
def test_commit_log_locations_never_show_a_password(password: str) -> None:
    location = f"s3a://AKIDX:{password}@bucket/ck"
    shown = display_location(location)
    assert not leaked(shown, password)
    assert shown.endswith("@bucket/ck") or shown.endswith("/ck")
    with pytest.raises(CommitStoreError, match="credentials in the URI are refused") as caught:
        open_store(location)
    assert not leaked(str(caught.value), password)
    opts = SinkOptions.from_options({**BASE, "commitLog": location})
    assert not leaked(repr(opts), password)
    with pytest.raises(SinkOptionError) as refused:
        opts.check_commit_dir(streaming=False)
    assert not leaked(str(refused.value), password)


@given(password=passwords)
def test_report_never_echoes_a_password_in_its_location(password: str) -> None:
    import contextlib
    import io

    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        status = report_main([f"s3a://AKIDX:{password}@bucket/ck"])
    assert status == 2
    assert "credentials in the URI are refused" in err.getvalue()
    assert not leaked(err.getvalue() + out.getvalue(), password)


@settings(max_examples=400)
@given(location=st.text(alphabet="sa3:/@.+-1xY", max_size=30))
def test_commit_log_locations_are_masked_as_the_user_info_pattern_masks_them(
    location: str,
) -> None:
    import re

    # The pattern display_location used to search with: the same masking, in one pass now.
    pattern = re.compile(r"([a-z][a-z0-9+.-]*://[^:/@]*):.*@", re.IGNORECASE | re.DOTALL)
    assert display_location(location) == pattern.sub(r"\1:***@", location, count=1)


def test_masking_a_long_location_takes_one_pass() -> None:
    import time

    started = time.monotonic()
    for location in ("/" + "y" * 100_000, "s3a://" + "k" * 100_000, "a://:" * 20_000 + "@"):
        display_location(location)
    assert time.monotonic() - started < 2.0  # the searched pattern took 35 s on the first
