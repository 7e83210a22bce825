"""The Schema Registry client against a tiny in-process HTTP server: wording, auth, retries, TLS.

The server (``http.server`` in a thread) plays the registry's REST API from a routing function
and records every request, so a test sees the bytes and headers the client sent. Waits between
rounds go to a manual clock, so the retry schedule is asserted without sleeping.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from kafka_sink.clock import ManualClock
from kafka_sink.errors import ConfigError
from kafka_sink.formats.registry import (
    Schema,
    SchemaReference,
    SchemaRegistryClient,
    SchemaRegistryConfig,
)
from kafka_sink.sink_errors import (
    IncompatibleSchemaError,
    SchemaRegistryAuthError,
    SchemaRegistryError,
    SchemaRegistryUnavailableError,
)
from kafka_sink.testing.certs import TestPki, make_test_pki

PASSWORD = "s3cr3t-pw"
TOKEN = "tok-abc-123"
AVRO = Schema('{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}')


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased: HTTP header names are case-insensitive
    body: bytes


Route = Callable[[Seen], tuple[int, object]]


@dataclass
class FakeRegistry:
    route: Route
    seen: list[Seen] = field(default_factory=list)
    url: str = ""


@contextlib.contextmanager
def _serving(context: ssl.SSLContext | None = None) -> Iterator[FakeRegistry]:
    fake = FakeRegistry(route=lambda req: (404, {"error_code": 40401, "message": "no"}))

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            headers = {k.lower(): v for k, v in self.headers.items()}
            seen = Seen(self.command, self.path, headers, self.rfile.read(length))
            fake.seen.append(seen)
            status, doc = fake.route(seen)
            data = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def do_PUT(self) -> None:
            self._serve()

        def log_message(self, format: str, *args: object) -> None:
            pass

    class Server(ThreadingHTTPServer):
        def get_request(self) -> tuple[socket.socket, Any]:
            sock, addr = super().get_request()
            if context is None:
                return sock, addr
            return context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

        def handle_error(self, request: Any, client_address: Any) -> None:
            pass  # refused handshakes are what some tests are about

    server = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    scheme = "https" if context else "http"
    fake.url = f"{scheme}://127.0.0.1:{server.server_address[1]}"
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def registry() -> Iterator[FakeRegistry]:
    with _serving() as fake:
        yield fake


def _closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def _client(
    options: dict[str, str], clock: ManualClock | None = None
) -> tuple[SchemaRegistryClient, list[int]]:
    waits: list[int] = []
    manual = clock or ManualClock()

    def sleep_ms(ms: int) -> None:
        waits.append(ms)
        manual.advance(ms)

    config = SchemaRegistryConfig.from_options(options)
    return SchemaRegistryClient(config, clock=manual, sleep_ms=sleep_ms), waits


# -- calls and their bytes ------------------------------------------------------------------------


def test_register_sends_the_rest_body_and_basic_auth(registry: FakeRegistry) -> None:
    registry.route = lambda req: (200, {"id": 7})
    client, _ = _client(
        {
            "schema.registry.url": registry.url,
            "schema.registry.basic.auth.user.info": f"alice:{PASSWORD}",
        }
    )
    proto = Schema(
        'syntax = "proto3"; message M { int64 id = 1; }',
        "PROTOBUF",
        (SchemaReference("common.proto", "common-value", 2),),
    )
    assert client.register("orders-value", AVRO) == 7
    assert client.register("a/b", proto) == 7

    first, second = registry.seen
    assert (first.method, first.path) == ("POST", "/subjects/orders-value/versions")
    assert first.headers["content-type"] == "application/vnd.schemaregistry.v1+json"
    expected = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
    assert first.headers["authorization"] == f"Basic {expected}"
    assert json.loads(first.body) == {"schema": AVRO.schema_str}  # Avro: no schemaType
    assert second.path == "/subjects/a%2Fb/versions"
    assert json.loads(second.body) == {
        "schema": proto.schema_str,
        "schemaType": "PROTOBUF",
        "references": [{"name": "common.proto", "subject": "common-value", "version": 2}],
    }
    assert PASSWORD not in repr(client) and PASSWORD not in repr(client.config)


def test_bearer_token_and_confluent_cloud_headers(registry: FakeRegistry) -> None:
    registry.route = lambda req: (200, {"id": 1, "version": 3, "schema": AVRO.schema_str})
    client, _ = _client(
        {
            "schema.registry.url": registry.url,
            "schema.registry.bearer.auth.credentials.source": "STATIC_TOKEN",
            "schema.registry.bearer.auth.token": TOKEN,
            "schema.registry.bearer.auth.logical.cluster": "lsrc-1",
            "schema.registry.bearer.auth.identity.pool.id": "pool-2",
        }
    )
    found = client.lookup("orders-value", AVRO)
    assert found is not None and (found.schema_id, found.version) == (1, 3)
    headers = registry.seen[0].headers
    assert headers["authorization"] == f"Bearer {TOKEN}"
    assert headers["target-sr-cluster"] == "lsrc-1"
    assert headers["confluent-identity-pool-id"] == "pool-2"
    assert TOKEN not in repr(client)


def test_user_info_in_the_url_is_sent_as_basic_auth_and_never_shown(
    registry: FakeRegistry,
) -> None:
    registry.route = lambda req: (200, {"id": 5, "schema": AVRO.schema_str})
    with_info = registry.url.replace("http://", f"http://bob:{PASSWORD}@")
    client, _ = _client(
        {
            "schema.registry.url": with_info,
            "schema.registry.basic.auth.credentials.source": "URL",
        }
    )
    assert client.schema_by_id(5) == AVRO
    sent = registry.seen[0].headers["authorization"]
    assert base64.b64decode(sent.split()[1]).decode() == f"bob:{PASSWORD}"
    assert client.config.urls == (registry.url,)
    assert PASSWORD not in repr(client)


def test_latest_version_and_lookup_of_a_missing_schema(registry: FakeRegistry) -> None:
    def route(req: Seen) -> tuple[int, object]:
        if req.method == "GET":
            doc = {
                "subject": "t-value",
                "id": 9,
                "version": 4,
                "schema": "{}",
                "schemaType": "JSON",
            }
            return 200, doc
        return 404, {"error_code": 40403, "message": "Schema not found"}

    registry.route = route
    client, _ = _client({"schema.registry.url": registry.url})
    latest = client.latest_version("t-value")
    assert (latest.schema_id, latest.version, latest.schema.schema_type) == (9, 4, "JSON")
    assert registry.seen[0].path == "/subjects/t-value/versions/latest"
    assert client.lookup("t-value", AVRO) is None


# -- compatibility --------------------------------------------------------------------------------


def test_incompatible_schema_names_subject_reason_and_fix(registry: FakeRegistry) -> None:
    reason = "READER_FIELD_MISSING_DEFAULT_VALUE: new field 'qty' has no default"

    def route(req: Seen) -> tuple[int, object]:
        if req.path.startswith("/compatibility/"):
            return 200, {"is_compatible": False, "messages": [reason]}
        return 200, {"compatibilityLevel": "BACKWARD"}

    registry.route = route
    client, _ = _client({"schema.registry.url": registry.url})
    verdict = client.check_compatibility("orders-value", AVRO)
    assert not verdict.is_compatible and verdict.messages == (reason,)
    assert registry.seen[0].path == (
        "/compatibility/subjects/orders-value/versions/latest?verbose=true"
    )
    with pytest.raises(IncompatibleSchemaError) as caught:
        client.ensure_compatible("orders-value", AVRO)
    text = str(caught.value)
    assert "'orders-value'" in text and reason in text and "BACKWARD" in text
    assert "Fix:" in text and registry.url in text


def test_a_subject_with_no_version_accepts_any_schema(registry: FakeRegistry) -> None:
    registry.route = lambda req: (404, {"error_code": 40401, "message": "Subject not found"})
    client, _ = _client({"schema.registry.url": registry.url})
    assert client.check_compatibility("new-value", AVRO).is_compatible
    client.ensure_compatible("new-value", AVRO)


def test_register_refused_as_incompatible_names_the_subject(registry: FakeRegistry) -> None:
    registry.route = lambda req: (
        (409, {"error_code": 409, "message": "Schema being registered is incompatible"})
        if req.method == "POST"
        else (200, {"compatibilityLevel": "FORWARD"})
    )
    client, _ = _client({"schema.registry.url": registry.url})
    with pytest.raises(IncompatibleSchemaError, match="'orders-value' under FORWARD"):
        client.register("orders-value", AVRO)


def test_a_refused_registration_keeps_the_registrys_whole_reason(registry: FakeRegistry) -> None:
    # Apicurio's 409 reads "Incompatible artifact: <subject> [AVRO], num of incompatible diffs:
    # {1}"; Confluent's messages hold colons too. The reason is the whole message, not its tail.
    said = "Incompatible artifact: orders-value [AVRO], num of incompatible diffs: {1}"
    registry.route = lambda req: (
        (409, {"error_code": 409, "message": said})
        if req.method == "POST"
        else (200, {"compatibilityLevel": "BACKWARD"})
    )
    client, _ = _client({"schema.registry.url": registry.url})
    with pytest.raises(IncompatibleSchemaError) as err:
        client.register("orders-value", AVRO)
    assert err.value.reasons == (said,)
    assert f"{registry.url}: {said})" in str(err.value)


# -- failures: bounded, named, secret-free --------------------------------------------------------


def test_several_urls_are_tried_in_turn(registry: FakeRegistry) -> None:
    registry.route = lambda req: (200, {"id": 3})
    down = _closed_port()
    client, waits = _client({"schema.registry.url": f"{down}, {registry.url}/"})
    assert client.register("s", AVRO) == 3
    assert waits == [] and len(registry.seen) == 1


def test_a_5xx_moves_on_and_rounds_wait_with_backoff(registry: FakeRegistry) -> None:
    answers = iter([(503, {"message": "busy"}), (500, {}), (200, {"id": 4})])
    registry.route = lambda req: next(answers)
    client, waits = _client({"schema.registry.url": registry.url})
    assert client.register("s", AVRO) == 4
    assert waits == [500, 1000]


def test_a_registry_that_is_down_fails_in_bounded_rounds_naming_every_url() -> None:
    first, second = _closed_port(), _closed_port()
    clock = ManualClock()
    client, waits = _client(
        {
            "schema.registry.url": f"{first},{second}",
            "schema.registry.basic.auth.user.info": f"u:{PASSWORD}",
            "schema.registry.max.retries": "3",
            "schema.registry.retries.wait.ms": "400",
            "schema.registry.retries.max.wait.ms": "1000",
        },
        clock,
    )
    with pytest.raises(SchemaRegistryUnavailableError) as caught:
        client.latest_version("s")
    text = str(caught.value)
    assert waits == [400, 800, 1000]
    assert first in text and second in text and "4 round(s) over 2200 ms" in text
    assert "Connection refused" in text and PASSWORD not in text


def test_an_exchange_that_hangs_is_cut_by_timeout_ms() -> None:
    with socket.socket() as listener:  # accepts (backlog), never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        client, _ = _client(
            {
                "schema.registry.url": url,
                "schema.registry.timeout.ms": "300",
                "schema.registry.max.retries": "0",
            }
        )
        began = time.monotonic()
        with pytest.raises(SchemaRegistryUnavailableError, match="timed out"):
            client.schema_by_id(1)
        assert time.monotonic() - began < 3.0


@pytest.mark.parametrize("status", [401, 403])
def test_refused_credentials_name_the_url_not_the_secret(
    registry: FakeRegistry, status: int
) -> None:
    registry.route = lambda req: (status, {"error_code": status, "message": "Unauthorized"})
    client, waits = _client(
        {
            "schema.registry.url": registry.url,
            "schema.registry.basic.auth.user.info": f"alice:{PASSWORD}",
        }
    )
    with pytest.raises(SchemaRegistryAuthError) as caught:
        client.register("s", AVRO)
    text = str(caught.value)
    assert registry.url in text and PASSWORD not in text and "alice" not in text
    assert ("refused the credentials" if status == 401 else "denied access") in text
    assert len(registry.seen) == 1 and waits == []  # not retried


def test_an_answer_that_is_not_json_says_to_check_the_url(registry: FakeRegistry) -> None:
    registry.route = lambda req: (422, {"error_code": 42201, "message": "Invalid schema"})
    client, _ = _client({"schema.registry.url": registry.url})
    with pytest.raises(SchemaRegistryError, match="error 42201: Invalid schema"):
        client.register("s", AVRO)


# -- options: every key applied or refused --------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({}, "schema.registry.url is missing"),
        ({"schema.registry.url": "registry:8081"}, "not an http:// or https:// URL"),
        ({"schema.registry.cache.capacity": "10"}, "schema.registry.cache.capacity"),
        (
            {"schema.registry.basic.auth.credentials.source": "SASL_INHERIT"},
            "SASL_INHERIT is not supported",
        ),
        ({"schema.registry.basic.auth.credentials.source": "URL"}, "has no user info"),
        ({"schema.registry.basic.auth.user.info": "nocolon"}, "expected USER:PASSWORD"),
        (
            {
                "schema.registry.basic.auth.user.info": f"a:{PASSWORD}",
                "schema.registry.bearer.auth.token": TOKEN,
            },
            "both basic auth",
        ),
        (
            {"schema.registry.bearer.auth.credentials.source": "OAUTHBEARER"},
            "only STATIC_TOKEN",
        ),
        ({"schema.registry.bearer.auth.logical.cluster": "x"}, "go with a bearer token"),
        ({"schema.registry.ssl.ca.location": "/nonexistent/ca.pem"}, "no file at"),
        ({"schema.registry.timeout.ms": "0"}, "schema.registry.timeout.ms: 0 is out of range"),
        ({"schema.registry.max.retries": "x"}, "schema.registry.max.retries: expected"),
    ],
)
def test_bad_options_are_refused_naming_the_key(options: dict[str, str], named: str) -> None:
    full = {"schema.registry.url": "https://registry.example:8081", **options}
    if options == {}:
        full = {}
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")) as caught:
        SchemaRegistryConfig.from_options(full)
    assert PASSWORD not in str(caught.value) and TOKEN not in str(caught.value)


def test_tls_keys_need_an_https_url_and_a_certificate(tmp_path: Path) -> None:
    pem = tmp_path / "ca.pem"
    pem.write_text("not a certificate")
    with pytest.raises(ConfigError, match=r"no schema\.registry\.url is https://"):
        SchemaRegistryConfig.from_options(
            {"schema.registry.url": "http://r:8081", "schema.registry.ssl.ca.location": str(pem)}
        )
    with pytest.raises(ConfigError, match=r"ssl\.key\.location needs"):
        SchemaRegistryConfig.from_options(
            {"schema.registry.url": "https://r:8081", "schema.registry.ssl.key.location": str(pem)}
        )
    with pytest.raises(ConfigError, match=r"ssl\.key\.password opens the client key"):
        SchemaRegistryConfig.from_options(
            {"schema.registry.url": "https://r:8081", "schema.registry.ssl.key.password": "pw"}
        )
    # A CA file that is not PEM fails when the client is built, naming the key and the file.
    config = SchemaRegistryConfig.from_options(
        {"schema.registry.url": "https://r:8081", "schema.registry.ssl.ca.location": str(pem)}
    )
    with pytest.raises(ConfigError, match=r"ssl\.ca\.location .*ca\.pem"):
        SchemaRegistryClient(config)


def test_keys_from_spark_arrive_lower_case_and_others_are_ignored() -> None:
    config = SchemaRegistryConfig.from_options(
        {
            "Schema.Registry.URL": "https://a:1/, https://b:2/api/ccompat/v7/",
            "topic": "t",
            "kafka.acks": "all",
        }
    )
    assert config.urls == ("https://a:1", "https://b:2/api/ccompat/v7")
    assert config.auth == "none"


def test_requests_match_confluent_kafkas_own_client(registry: FakeRegistry) -> None:
    # An independent client making the same calls: same paths, content type, auth header and
    # schema fields (confluent-kafka also sends its defaults: schemaType AVRO, no references).
    from confluent_kafka.schema_registry import Schema as ConfluentSchema
    from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient

    registry.route = lambda req: (200, {"id": 3, "version": 1, "is_compatible": True})
    ours, _ = _client(
        {"schema.registry.url": registry.url, "schema.registry.basic.auth.user.info": "a:b"}
    )
    theirs = ConfluentClient({"url": registry.url, "basic.auth.user.info": "a:b"})
    for client_calls in (
        lambda: (ours.register("a/b", AVRO), ours.check_compatibility("a/b", AVRO)),
        lambda: (
            theirs.register_schema("a/b", ConfluentSchema(AVRO.schema_str, "AVRO")),
            theirs.test_compatibility("a/b", ConfluentSchema(AVRO.schema_str, "AVRO")),
        ),
    ):
        client_calls()
    mine, confluent = registry.seen[:2], registry.seen[2:]
    for a, b in zip(mine, confluent, strict=True):
        assert a.path.partition("?")[0] == b.path.partition("?")[0]
        assert a.headers["content-type"] == b.headers["content-type"]
        assert a.headers["authorization"] == b.headers["authorization"]
        theirs_body = json.loads(b.body)
        assert theirs_body.pop("schemaType") == "AVRO" and theirs_body.pop("references") == []
        assert json.loads(a.body) == theirs_body


# -- HTTPS: the TLS keys take effect ---------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> TestPki:
    return make_test_pki(tmp_path_factory.mktemp("pki"))


def _mtls_server(pki: TestPki) -> contextlib.AbstractContextManager[FakeRegistry]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca))
    context.load_cert_chain(str(pki.broker_keystore))
    context.verify_mode = ssl.CERT_REQUIRED
    return _serving(context)


def test_mutual_tls_with_an_encrypted_client_key(pki: TestPki) -> None:
    with _mtls_server(pki) as server:
        server.route = lambda req: (200, {"id": 11})
        client, _ = _client(
            {
                "schema.registry.url": server.url,
                "schema.registry.ssl.ca.location": str(pki.ca),
                "schema.registry.ssl.certificate.location": str(pki.client_cert),
                "schema.registry.ssl.key.location": str(pki.client_key_encrypted),
                "schema.registry.ssl.key.password": pki.key_password,
                "schema.registry.max.retries": "0",
            }
        )
        assert client.register("s", AVRO) == 11
        assert pki.key_password not in repr(client)


def test_tls_failures_are_named_without_secrets(pki: TestPki) -> None:
    base = {"schema.registry.max.retries": "0", "schema.registry.timeout.ms": "3000"}
    with _mtls_server(pki) as server:
        no_ca, _ = _client({**base, "schema.registry.url": server.url})
        with pytest.raises(SchemaRegistryUnavailableError, match="certificate was not accepted"):
            no_ca.schema_by_id(1)
        no_cert, _ = _client(
            {
                **base,
                "schema.registry.url": server.url,
                "schema.registry.ssl.ca.location": str(pki.ca),
            }
        )
        with pytest.raises(SchemaRegistryUnavailableError, match=server.url):
            no_cert.schema_by_id(1)
    wrong = SchemaRegistryConfig.from_options(
        {
            "schema.registry.url": "https://r:1",
            "schema.registry.ssl.certificate.location": str(pki.client_cert),
            "schema.registry.ssl.key.location": str(pki.client_key_encrypted),
            "schema.registry.ssl.key.password": "not-the-password",
        }
    )
    with pytest.raises(ConfigError, match=r"ssl\.key\.password") as caught:
        SchemaRegistryClient(wrong)
    assert "not-the-password" not in str(caught.value)


def test_a_key_password_for_an_unencrypted_client_key_is_refused(pki: TestPki) -> None:
    config = SchemaRegistryConfig.from_options(
        {
            "schema.registry.url": "https://r:1",
            "schema.registry.ssl.certificate.location": str(pki.client_cert),
            "schema.registry.ssl.key.location": str(pki.client_key),
            "schema.registry.ssl.key.password": "never-used",
        }
    )
    with pytest.raises(ConfigError, match=r"ssl\.key\.password.*not encrypted") as caught:
        SchemaRegistryClient(config)
    assert "never-used" not in str(caught.value)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("schema.registry.timeout.ms", "1_000"),
        ("schema.registry.timeout.ms", "9" * 5_000),
        ("schema.registry.max.retries", "\uff15x"),
        ("schema.registry.retries.wait.ms", str(2**31)),
    ],
)
def test_registry_integers_are_read_as_java_reads_them_with_a_capped_quote(
    key: str, value: str
) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")) as caught:
        SchemaRegistryConfig.from_options({"schema.registry.url": "http://r:1", key: value})
    assert len(str(caught.value)) < 400


def test_a_registry_file_option_too_long_for_the_os_is_named_not_raised() -> None:
    with pytest.raises(ConfigError, match=r"ssl\.ca\.location: no file at") as caught:
        SchemaRegistryConfig.from_options(
            {"schema.registry.url": "https://r:1", "schema.registry.ssl.ca.location": "p" * 100_000}
        )
    assert len(str(caught.value)) < 400
