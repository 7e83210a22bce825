"""The registry client against hostile registries: slow, oversized and malformed answers.

A slow or oversized registry is a real loopback peer (``tests.fakes.http_peer``) sending its
answer one byte per 0.5 s or past the cap; malformed answers are generated with hypothesis and
handed to the client through its ``transport``, so thousands of them run in seconds. Every one
must end as the registry's own error naming the URL, never a raw KeyError, TypeError,
RecursionError or ValueError out of the parsing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_sink.clock import ManualClock
from kafka_sink.errors import ConfigError
from kafka_sink.formats.registry import (
    MAX_ANSWER_BYTES,
    Schema,
    SchemaRegistryClient,
    SchemaRegistryConfig,
)
from kafka_sink.net.http import HttpResponse
from kafka_sink.sink_errors import (
    SchemaRegistryAnswerError,
    SchemaRegistryError,
    SchemaRegistryUnavailableError,
)
from tests.fakes.http_peer import ENDLESS_HEAD, response_head, serving

URL = "http://registry.example:8081"
AVRO = Schema('{"type":"string"}')
MAX_ID = 2**31 - 1
MARGIN_S = 0.75


def _client(options: dict[str, str]) -> SchemaRegistryClient:
    clock = ManualClock()
    config = SchemaRegistryConfig.from_options(options)
    return SchemaRegistryClient(config, clock=clock, sleep_ms=clock.advance)


# -- a registry that drips its answer -------------------------------------------------------------


@pytest.mark.parametrize(
    ("head", "drip"),
    [(b"", ENDLESS_HEAD), (response_head(length=10_000), b'{"id": 1' + b" " * 10_000)],
    ids=["headers", "body"],
)
def test_a_registry_dripping_its_answer_is_cut_at_timeout_ms(head: bytes, drip: bytes) -> None:
    with serving(head, drip, interval_s=0.5) as peer:
        client = _client(
            {
                "schema.registry.url": peer.url,
                "schema.registry.timeout.ms": "1000",
                "schema.registry.max.retries": "0",
            }
        )
        began = time.monotonic()
        with pytest.raises(SchemaRegistryUnavailableError, match="timed out") as caught:
            client.register("s", AVRO)
        took = time.monotonic() - began
    assert 0.9 < took < 1.0 + MARGIN_S
    assert peer.url in str(caught.value)


def test_a_call_over_several_urls_and_rounds_ends_within_its_documented_bound() -> None:
    # (max.retries + 1) * len(urls) exchanges of timeout.ms each; the waits go to the clock.
    with serving(b"", ENDLESS_HEAD, interval_s=0.5, give_up_s=4.0) as peer:
        client = _client(
            {
                "schema.registry.url": f"{peer.url},{peer.url}/",
                "schema.registry.timeout.ms": "600",
                "schema.registry.max.retries": "1",
            }
        )
        began = time.monotonic()
        with pytest.raises(SchemaRegistryUnavailableError, match="timed out"):
            client.latest_version("s")
        took = time.monotonic() - began
    assert peer.connections == 4
    assert 4 * 0.6 - 0.1 < took < 4 * 0.6 + MARGIN_S


# -- a registry that answers too much -------------------------------------------------------------


def test_an_answer_past_the_cap_is_refused_naming_the_url_and_the_cap() -> None:
    body = json.dumps({"id": 3, "pad": "x" * MAX_ANSWER_BYTES}).encode()
    with serving(response_head(length=len(body)) + body) as peer:
        client = _client({"schema.registry.url": peer.url})
        with pytest.raises(SchemaRegistryAnswerError) as caught:
            client.register("s", AVRO)
    text = str(caught.value)
    assert peer.url in text and f"larger than {MAX_ANSWER_BYTES} bytes" in text
    assert caught.value.url == peer.url
    assert peer.connections == 1  # an answer, not a failure to answer: not retried


def test_an_answer_announcing_400_mib_is_refused_at_once() -> None:
    with serving(response_head(length=400 * 2**20), b"{", interval_s=5.0) as peer:
        client = _client({"schema.registry.url": peer.url})
        began = time.monotonic()
        with pytest.raises(SchemaRegistryAnswerError, match="larger than"):
            client.schema_by_id(1)
        assert time.monotonic() - began < 1.0


# -- credentials never go to an http:// URL beside https:// ones -----------------------------------


@pytest.mark.parametrize(
    "credentials",
    [
        {"schema.registry.basic.auth.user.info": "alice:pw-123"},
        {"schema.registry.bearer.auth.token": "tok-123"},
        {"schema.registry.basic.auth.credentials.source": "URL"},
    ],
    ids=["basic", "bearer", "url user info"],
)
def test_mixed_schemes_with_credentials_are_refused(credentials: dict[str, str]) -> None:
    urls = "https://a.example:8081,http://b.example:8081"
    if "schema.registry.basic.auth.credentials.source" in credentials:
        urls = "https://alice:pw-123@a.example:8081,http://alice:pw-123@b.example:8081"
    with pytest.raises(ConfigError) as caught:
        SchemaRegistryConfig.from_options({"schema.registry.url": urls, **credentials})
    text = str(caught.value)
    assert "schema.registry.url" in text and "http://b.example:8081" in text
    assert "clear text" in text and "pw-123" not in text and "tok-123" not in text


def test_one_scheme_with_credentials_and_mixed_schemes_without_them_are_accepted() -> None:
    both = "https://a.example:8081,http://b.example:8081"
    assert len(SchemaRegistryConfig.from_options({"schema.registry.url": both}).urls) == 2
    for urls in ("https://a.example,https://b.example", "http://a.example,http://b.example"):
        config = SchemaRegistryConfig.from_options(
            {"schema.registry.url": urls, "schema.registry.basic.auth.user.info": "u:p"}
        )
        assert config.auth == "basic"


# -- malformed answers ----------------------------------------------------------------------------

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**64), 2**64)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def _bad_id(value: Any) -> bool:
    return type(value) is not int or not 1 <= value <= MAX_ID


def _not_str(value: Any) -> bool:
    return not isinstance(value, str)


def _bad_schema_type(value: Any) -> bool:
    return value is not None and value not in ("AVRO", "PROTOBUF", "JSON")


def _bad_references(value: Any) -> bool:
    if value is None:
        return False
    if not isinstance(value, list):
        return True
    return any(
        not isinstance(r, dict)
        or _not_str(r.get("name"))
        or _not_str(r.get("subject"))
        or _bad_id(r.get("version"))
        for r in value
    )


def _bad_messages(value: Any) -> bool:
    if value is None or isinstance(value, str):
        return False
    return not isinstance(value, list) or any(_not_str(m) for m in value)


SCHEMA_FIELDS: dict[str, Callable[[Any], bool]] = {
    "schema": _not_str,
    "schemaType": _bad_schema_type,
    "references": _bad_references,
}
REF = {"name": "common.proto", "subject": "common-value", "version": 2}
SCHEMA_DOC = {"schema": "{}", "schemaType": "PROTOBUF", "references": [REF]}


# Each call: how to make it, a valid answer, and when each field's value is wrong (a key that
# must be there is wrong when missing: the predicate is asked about None).
Call = tuple[
    Callable[[SchemaRegistryClient], Any], dict[str, Any], dict[str, Callable[[Any], bool]]
]
CALLS: dict[str, Call] = {
    "register": (lambda c: c.register("s", AVRO), {"id": 7}, {"id": _bad_id}),
    "lookup": (
        lambda c: c.lookup("s", AVRO),
        {"id": 7, "version": 2, "subject": "s", "schema": "{}"},
        {"id": _bad_id, "version": _bad_id},
    ),
    "latest_version": (
        lambda c: c.latest_version("s"),
        {"id": 7, "version": 2, "subject": "s", **SCHEMA_DOC},
        {"id": _bad_id, "version": _bad_id, "subject": _not_str, **SCHEMA_FIELDS},
    ),
    "schema_by_id": (lambda c: c.schema_by_id(7), dict(SCHEMA_DOC), SCHEMA_FIELDS),
    "check_compatibility": (
        lambda c: c.check_compatibility("s", AVRO),
        {"is_compatible": True, "messages": []},
        {"is_compatible": lambda v: not isinstance(v, bool), "messages": _bad_messages},
    ),
    "get_compatibility": (
        lambda c: c.get_compatibility("s"),
        {"compatibilityLevel": "FULL"},
        {"compatibilityLevel": _not_str},
    ),
}


@st.composite
def wrong_fields(draw: st.DrawFn, name: str) -> bytes:
    """A valid answer of ``name`` with one field missing or of a wrong type or range."""
    _call, valid, fields = CALLS[name]
    doc = json.loads(json.dumps(valid))
    key = draw(st.sampled_from(sorted(fields)))
    bad = fields[key]
    if key == "subject":  # optional: only its type is checked
        value = draw(JSON.filter(lambda v: v is not None and bad(v)))
    elif key == "references" and draw(st.booleans()):
        # A list whose one reference is broken.
        ref_key = draw(st.sampled_from(["name", "subject", "version"]))
        ref = dict(REF)
        check = _bad_id if ref_key == "version" else _not_str
        ref[ref_key] = draw(JSON.filter(check) | st.sampled_from([0, -1, 2**31, True, 1.5]))
        value = [REF, draw(st.sampled_from([ref, "not-a-dict", 3, None]))]
    else:
        value = draw(
            JSON.filter(bad)
            | st.sampled_from(
                [0, -1, MAX_ID + 1, 2**40, True, False, 1.5, "7", None, "avro2"]
            ).filter(bad)
        )
    if value is None and draw(st.booleans()):
        del doc[key]  # only a required key's predicate takes None: missing is as bad
    else:
        doc[key] = value
    return json.dumps(doc).encode()


@st.composite
def broken_bodies(draw: st.DrawFn, name: str) -> bytes:
    """Not an answer at all: truncated, not JSON, too deep, or JSON of the wrong kind."""
    valid = json.dumps(CALLS[name][1]).encode()
    kind = draw(st.sampled_from(["truncated", "bytes", "deep", "not an object", "empty"]))
    if kind == "truncated":
        return valid[: draw(st.integers(1, len(valid) - 1))]
    if kind == "bytes":
        return draw(st.binary(min_size=1, max_size=40).filter(_not_json_object))
    if kind == "deep":
        depth = draw(st.integers(1_000, 200_000))
        return draw(st.sampled_from([b"[", b'{"a":'])) * depth
    if kind == "empty":
        return b""
    return json.dumps(draw(JSON.filter(lambda v: not isinstance(v, dict)))).encode()


def _not_json_object(data: bytes) -> bool:
    try:
        return not isinstance(json.loads(data), dict)
    except (ValueError, RecursionError):
        return True


def _answering(status: int, body: bytes) -> SchemaRegistryClient:
    def transport(method: str, url: str, **_kwargs: Any) -> HttpResponse:
        return HttpResponse(status, body, "application/vnd.schemaregistry.v1+json")

    clock = ManualClock()
    config = SchemaRegistryConfig.from_options({"schema.registry.url": URL})
    return SchemaRegistryClient(config, transport=transport, clock=clock, sleep_ms=clock.advance)


def _assert_named_registry_error(name: str, status: int, body: bytes) -> SchemaRegistryError:
    call = CALLS[name][0]
    with pytest.raises(SchemaRegistryError) as caught:
        call(_answering(status, body))
    assert caught.value.url == URL and URL in str(caught.value)
    return caught.value


@pytest.mark.parametrize("name", sorted(CALLS))
def test_the_valid_answers_parse(name: str) -> None:
    call, valid, _fields = CALLS[name]
    assert call(_answering(200, json.dumps(valid).encode())) is not None


@pytest.mark.parametrize("name", sorted(CALLS))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(data=st.data())
def test_a_field_missing_or_of_a_wrong_type_is_the_registrys_error(
    name: str, data: st.DataObject
) -> None:
    body = data.draw(wrong_fields(name))
    error = _assert_named_registry_error(name, 200, body)
    assert isinstance(error, SchemaRegistryAnswerError)
    assert "answered" in str(error)


@pytest.mark.parametrize("name", sorted(CALLS))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(data=st.data())
def test_a_body_that_is_no_answer_is_the_registrys_error(name: str, data: st.DataObject) -> None:
    body = data.draw(broken_bodies(name))
    _assert_named_registry_error(name, 200, body)


@settings(max_examples=150, deadline=None)
@given(
    status=st.sampled_from([400, 404, 409, 422, 500]),
    body=st.binary(max_size=30)
    | JSON.map(lambda v: json.dumps(v).encode())
    | st.integers(1_000, 100_000).map(lambda depth: b"[" * depth)
    | st.fixed_dictionaries({"error_code": JSON, "message": JSON}).map(
        lambda v: json.dumps(v).encode()
    ),
)
def test_a_malformed_error_answer_is_the_registrys_error(status: int, body: bytes) -> None:
    _assert_named_registry_error("register", status, body)


@pytest.mark.parametrize(
    ("answer", "named"),
    [
        ({"id": 1.5}, "'id' is 1.5"),
        ({"id": True}, "'id' is True"),
        ({"id": -1}, "'id' is -1"),
        ({"id": 2**40}, f"'id' is {2**40}"),
        ({}, "no 'id'"),
        ([1], "a JSON list"),
    ],
)
def test_an_id_that_is_no_schema_id_is_named_with_the_valid_range(
    answer: object, named: str
) -> None:
    error = _assert_named_registry_error("register", 200, json.dumps(answer).encode())
    assert named in str(error)
    if isinstance(answer, dict) and answer:
        assert "an integer from 1 to 2147483647" in str(error)
