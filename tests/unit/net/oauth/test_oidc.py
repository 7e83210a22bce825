"""The OIDC token sources: the client credentials and jwt-bearer grants against a scripted
endpoint on 127.0.0.1, the answer's checks (hypothesis over malformed answers), token files."""

from __future__ import annotations

import base64
import contextlib
import json
import math
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from joserfc import jwt as jose_jwt
from joserfc.jwk import ECKey, RSAKey

from kafka_sink.errors import ConfigError
from kafka_sink.net.oauth.oidc import (
    MAX_RESPONSE_BYTES,
    MAX_TOKEN_CHARS,
    AssertionSettings,
    TokenChecks,
    make_assertion,
    parse_token_response,
    token_from_jwt,
)
from kafka_sink.net.oauth.sources import token_source
from kafka_sink.net.oauth.token import OAuthBearerToken, TokenSourceError
from tests.fakes.http_peer import response_head, serving
from tests.unit.net.oauth.tokens import (
    EC_KEY,
    RSA_KEY,
    SECRET,
    claims,
    form,
    header,
    raw_answer,
    token_answer,
    unsigned_jwt,
    write_pem,
)

JWT_BEARER = "org.apache.kafka.common.security.oauthbearer.JwtBearerJwtRetriever"


def cc_settings(url: str, **extra: object) -> dict[str, object]:
    return {
        "sasl.oauthbearer.token.endpoint.url": url + "/token",
        "sasl.oauthbearer.client.credentials.client.id": "writer-app",
        "sasl.oauthbearer.client.credentials.client.secret": SECRET,
        **extra,
    }


def assert_no_secret(text: str) -> None:
    assert SECRET not in text
    assert base64.b64encode(f"writer-app:{SECRET}".encode()).decode() not in text


# -- client credentials ---------------------------------------------------------------------------


def test_client_credentials_request_is_javas_and_the_token_is_read() -> None:
    jwt = unsigned_jwt(claims(lifetime_s=600, sub="svc-writer", scope="kafka.write"))
    with serving(token_answer(jwt, expires_in=600)) as peer:
        source = token_source(cc_settings(peer.url, **{"sasl.oauthbearer.scope": "kafka.write"}))
        token = source.fetch()
    assert token.value == jwt
    assert token.principal == "svc-writer"
    assert abs(token.expires_at_ms - (time.time() + 600) * 1000) < 5_000
    assert token.issued_at_ms is not None
    (request,) = peer.requests
    assert request.startswith(b"POST /token HTTP/1.1")
    assert form(request) == {"grant_type": "client_credentials", "scope": "kafka.write"}
    # Java's default (header.urlencode=false): id and secret joined as they are.
    basic = base64.b64encode(f"writer-app:{SECRET}".encode()).decode()
    assert header(request, "Authorization") == f"Basic {basic}"
    assert header(request, "Content-Type") == "application/x-www-form-urlencoded"
    assert SECRET.encode() not in request.partition(b"\r\n\r\n")[2]
    for shown in (repr(source), source.describe(), repr(token)):
        assert_no_secret(shown)
        assert jwt not in shown


def test_header_urlencode_encodes_id_and_secret_as_rfc6749_asks() -> None:
    with serving(token_answer(unsigned_jwt(claims()))) as peer:
        token_source(cc_settings(peer.url, **{"sasl.oauthbearer.header.urlencode": "true"})).fetch()
    encoded = "s3cret-Value%2Fwith%2Bodd%3Dchars"
    basic = base64.b64encode(f"writer-app:{encoded}".encode()).decode()
    assert header(peer.requests[0], "Authorization") == f"Basic {basic}"


@pytest.mark.parametrize(
    ("status", "body", "may_clear", "message"),
    [
        (
            401,
            b'{"error":"invalid_client"}',
            False,
            r"refused \(HTTP 401, error 'invalid_client'\)",
        ),
        (400, b'{"error":"invalid_scope"}', False, r"check sasl.oauthbearer.scope"),
        (403, b"<html>no</html>", False, r"HTTP 403"),
        (503, b"", True, r"HTTP 503; will retry"),
        (429, b"", True, r"HTTP 429"),
        # An error code that is no code is not quoted (it could be anything the peer sent).
        (401, json.dumps({"error": SECRET}).encode(), False, r"HTTP 401\)"),
    ],
)
def test_endpoint_refusals_and_failures_name_the_endpoint_never_the_secret(
    status: int, body: bytes, may_clear: bool, message: str
) -> None:
    with serving(raw_answer(body, status)) as peer:
        source = token_source(cc_settings(peer.url))
        with pytest.raises(TokenSourceError, match=message) as info:
            source.fetch()
    assert info.value.may_clear is may_clear
    assert f"token endpoint {peer.url}/token" in str(info.value)
    assert_no_secret(str(info.value))


def test_unreachable_endpoint_fails_in_seconds_and_may_clear() -> None:
    with serving(b"") as peer:
        url = peer.url
    started = time.monotonic()
    with pytest.raises(TokenSourceError, match=r"unreachable") as info:
        token_source(cc_settings(url)).fetch()
    assert time.monotonic() - started < 5
    assert info.value.may_clear is True
    assert url in str(info.value)


def test_a_silent_endpoint_is_cut_at_connect_plus_read_timeout() -> None:
    with serving(response_head(200, length=100), drip=b"x" * 100, interval_s=0.2) as peer:
        source = token_source(
            cc_settings(
                peer.url,
                **{"sasl.login.connect.timeout.ms": 300, "sasl.login.read.timeout.ms": "400"},
            )
        )
        started = time.monotonic()
        with pytest.raises(TokenSourceError, match=r"unreachable \(timed out\)") as info:
            source.fetch()
    assert 0.6 < time.monotonic() - started < 3
    assert info.value.may_clear is True


def test_an_oversized_answer_is_not_read() -> None:
    body = b'{"access_token":"' + b"a" * (MAX_RESPONSE_BYTES + 10) + b'"}'
    with serving(raw_answer(body)) as peer, pytest.raises(TokenSourceError, match="larger"):
        token_source(cc_settings(peer.url)).fetch()


# -- the answer's checks --------------------------------------------------------------------------


CHECKS = TokenChecks()


def read(answer: object, checks: TokenChecks = CHECKS) -> OAuthBearerToken:
    return parse_token_response(json.dumps(answer).encode(), source="ep", checks=checks)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ([], r"not a JSON object"),
        ({"access_token": 12}, r"no access_token string"),
        ({"access_token": None}, r"no access_token string"),
        ({"token": "x"}, r"no access_token string"),
        ({"access_token": "a b"}, r"not a bearer token"),
        ({"access_token": "a" * (MAX_TOKEN_CHARS + 1)}, r"not a bearer token"),
        ({"access_token": "opaque"}, r"no expires_in"),
        ({"access_token": "opaque", "expires_in": True}, r"expires_in"),
        ({"access_token": "opaque", "expires_in": -5}, r"expires_in"),
        ({"access_token": "opaque", "expires_in": 0}, r"expires_in"),
        ({"access_token": "opaque", "expires_in": 10**12}, r"expires_in"),
        ({"access_token": "opaque", "expires_in": "soon"}, r"expires_in"),
        ({"access_token": unsigned_jwt({"sub": "a"})}, r"no valid 'exp'"),
        ({"access_token": unsigned_jwt({"sub": "a", "exp": "tomorrow"})}, r"no valid 'exp'"),
        ({"access_token": unsigned_jwt({"sub": "a", "exp": 10**13})}, r"no valid 'exp'"),
        ({"access_token": unsigned_jwt(claims(sub=None))}, r"no 'sub' claim"),
        ({"access_token": unsigned_jwt(claims(sub=""))}, r"no 'sub' claim"),
        ({"access_token": unsigned_jwt(claims(iat="x"))}, r"'iat'"),
        ({"access_token": unsigned_jwt(claims(scope=[1, 2]))}, r"'scope' claim"),
        ({"access_token": unsigned_jwt(claims(lifetime_s=-10))}, r"already expired"),
    ],
)
def test_malformed_answers_are_refused_without_quoting_them(answer: object, message: str) -> None:
    with pytest.raises(TokenSourceError, match=message) as info:
        read(answer)
    assert info.value.may_clear is False
    assert str(info.value).startswith("ep: ")
    assert "a" * 100 not in str(info.value)


def test_the_earlier_of_exp_and_expires_in_is_the_expiry() -> None:
    now_ms = int(time.time() * 1000)
    token = read({"access_token": unsigned_jwt(claims(lifetime_s=3600)), "expires_in": "60"})
    assert abs(token.expires_at_ms - (now_ms + 60_000)) < 2_000
    opaque = read({"access_token": "opaque-token", "expires_in": 90.5})
    assert opaque.principal is None
    assert abs(opaque.expires_at_ms - (now_ms + 90_500)) < 2_000


def test_claim_names_audience_and_issuer_are_applied() -> None:
    jwt = unsigned_jwt(claims(sub=None, client_id="app-7", aud=["kafka"], iss="https://idp"))
    checks = TokenChecks(
        sub_claim_name="client_id",
        expected_audience=("other", "kafka"),
        expected_issuer="https://idp",
        extensions={"logicalCluster": "lkc-1"},
    )
    token = read({"access_token": jwt}, checks)
    assert token.principal == "app-7"
    assert token.extensions == {"logicalCluster": "lkc-1"}
    with pytest.raises(TokenSourceError, match=r"'aud' claim holds none"):
        read(
            {"access_token": jwt}, TokenChecks(sub_claim_name="client_id", expected_audience=("x",))
        )
    with pytest.raises(TokenSourceError, match=r"'iss' claim"):
        read({"access_token": jwt}, TokenChecks(sub_claim_name="client_id", expected_issuer="x"))
    with pytest.raises(TokenSourceError, match=r"cannot be checked"):
        read({"access_token": "opaque", "expires_in": 60}, TokenChecks(expected_issuer="x"))


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(
    token=st.one_of(
        _json,
        st.builds(
            unsigned_jwt,
            st.dictionaries(st.sampled_from(["sub", "exp", "iat", "scope", "aud"]), _json),
        ),
    ),
    expires_in=st.one_of(st.none(), _json, st.integers(), st.floats(allow_nan=True)),
    extra=st.dictionaries(st.text(max_size=8), _json, max_size=3),
)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_answer_is_a_sane_token_or_a_token_source_error(
    token: object, expires_in: object, extra: dict[str, Any]
) -> None:
    answer = {**extra, "access_token": token, "expires_in": expires_in}
    try:
        body = json.dumps(answer).encode()
    except ValueError:
        return
    now_ms = int(time.time() * 1000)
    try:
        got = parse_token_response(body, source="ep", checks=CHECKS)
    except TokenSourceError as exc:
        assert exc.may_clear is False
        return
    assert isinstance(got.value, str) and 0 < len(got.value) <= MAX_TOKEN_CHARS
    assert got.expires_at_ms > now_ms
    assert got.principal is None or (isinstance(got.principal, str) and got.principal)


@given(st.binary(max_size=200))
@settings(max_examples=200, deadline=None)
def test_any_bytes_are_a_token_or_a_token_source_error(body: bytes) -> None:
    with contextlib.suppress(TokenSourceError):
        parse_token_response(body, source="ep", checks=CHECKS)


def test_floats_out_of_range_never_crash() -> None:
    for value in (math.inf, -math.inf, 1e300, -1.0):
        with pytest.raises(TokenSourceError, match="'exp'"):
            token_from_jwt(unsigned_jwt({"sub": "a", "exp": value}), source="s", checks=CHECKS)
        with pytest.raises(TokenSourceError, match="expires_in"):
            parse_token_response(
                json.dumps({"access_token": "x", "expires_in": value}).encode(),
                source="s",
                checks=CHECKS,
            )


# -- jwt-bearer -----------------------------------------------------------------------------------


def test_jwt_bearer_request_carries_a_signed_assertion(tmp_path: Path) -> None:
    key_file = write_pem(tmp_path / "key.pem", RSA_KEY)
    template = tmp_path / "template.json"
    template.write_text(
        json.dumps({"header": {"kid": "k-1"}, "payload": {"tenant": "t9", "iss": "from-template"}})
    )
    jwt = unsigned_jwt(claims(sub="svc-signed"))
    with serving(token_answer(jwt)) as peer:
        source = token_source(
            {
                "sasl.oauthbearer.token.endpoint.url": peer.url + "/token",
                "sasl.oauthbearer.jwt.retriever.class": JWT_BEARER,
                "sasl.oauthbearer.assertion.private.key.file": key_file,
                "sasl.oauthbearer.assertion.template.file": str(template),
                "sasl.oauthbearer.assertion.claim.iss": "writer-app",
                "sasl.oauthbearer.assertion.claim.sub": "writer-app",
                "sasl.oauthbearer.assertion.claim.aud": "https://idp/token",
                "sasl.oauthbearer.assertion.claim.exp.seconds": "120",
                "sasl.oauthbearer.assertion.claim.nbf.seconds": 30,
                "sasl.oauthbearer.assertion.claim.jti.include": "true",
                "sasl.oauthbearer.scope": "kafka",
            }
        )
        token = source.fetch()
    assert token.principal == "svc-signed"
    fields = form(peer.requests[0])
    assert fields["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer"
    assert fields["scope"] == "kafka"
    assert header(peer.requests[0], "Authorization") is None
    public = RSAKey.import_key(RSA_KEY.public_key())
    decoded = jose_jwt.decode(fields["assertion"], public, algorithms=["RS256"])
    assert decoded.header == {"kid": "k-1", "alg": "RS256", "typ": "JWT"}
    c = decoded.claims
    # Settings override the template; the times are Java's formulas.
    assert (c["iss"], c["sub"], c["aud"], c["tenant"]) == (
        "writer-app",
        "writer-app",
        "https://idp/token",
        "t9",
    )
    assert c["exp"] - c["iat"] == 120 and c["iat"] - c["nbf"] == 30
    assert abs(c["iat"] - time.time()) < 5
    assert len(c["jti"]) == 36
    assert fields["assertion"] not in repr(source) + source.describe()


def test_es256_and_an_encrypted_key(tmp_path: Path) -> None:
    key_file = write_pem(tmp_path / "ec.pem", EC_KEY, passphrase=b"pass-phrase-1")
    settings_ = AssertionSettings(
        private_key_file=key_file, private_key_passphrase="pass-phrase-1", algorithm="ES256"
    )
    assertion = make_assertion(settings_, now_s=1_700_000_000)
    decoded = jose_jwt.decode(
        assertion, ECKey.import_key(EC_KEY.public_key()), algorithms=["ES256"]
    )
    assert decoded.claims == {"iat": 1_700_000_000, "exp": 1_700_000_300, "nbf": 1_699_999_940}
    assert "jti" not in decoded.claims
    base = {
        "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
        "sasl.oauthbearer.jwt.retriever.class": "JwtBearerJwtRetriever",
        "sasl.oauthbearer.assertion.private.key.file": key_file,
        "sasl.oauthbearer.assertion.algorithm": "es256",
    }
    with pytest.raises(ConfigError, match=r"did not load as a PEM EC private key") as info:
        token_source({**base, "sasl.oauthbearer.assertion.private.key.passphrase": "wrong-pass-9"})
    assert "wrong-pass-9" not in str(info.value)
    token_source({**base, "sasl.oauthbearer.assertion.private.key.passphrase": "pass-phrase-1"})


def test_a_pre_signed_assertion_file_is_sent_as_it_is(tmp_path: Path) -> None:
    assertion = unsigned_jwt({"iss": "pre-signed"})
    path = tmp_path / "assertion.jwt"
    path.write_text(assertion + "\n")
    with serving(token_answer(unsigned_jwt(claims()))) as peer:
        token_source(
            {
                "sasl.oauthbearer.token.endpoint.url": peer.url,
                "sasl.oauthbearer.jwt.retriever.class": JWT_BEARER,
                "sasl.oauthbearer.assertion.file": str(path),
            }
        ).fetch()
    assert form(peer.requests[0])["assertion"] == assertion
    path.write_text("not a jwt")
    with pytest.raises(TokenSourceError, match=r"does not hold a JWT"):
        make_assertion(AssertionSettings(assertion_file=str(path)))


# -- token files ----------------------------------------------------------------------------------


def test_a_file_url_is_a_token_file_read_on_every_fetch(tmp_path: Path) -> None:
    path = tmp_path / "token.jwt"
    path.write_text(unsigned_jwt(claims(sub="first")))
    source = token_source({"sasl.oauthbearer.token.endpoint.url": path.as_uri()})
    assert source.fetch().principal == "first"
    path.write_text(unsigned_jwt(claims(sub="rotated")) + "\n")
    assert source.fetch().principal == "rotated"
    path.write_text("opaque-token")
    with pytest.raises(TokenSourceError, match=r"not a JWT"):
        source.fetch()
    path.unlink()
    with pytest.raises(TokenSourceError, match=r"could not be read") as info:
        source.fetch()
    assert info.value.may_clear is True


def test_a_client_assertion_request_is_kip_1258s(tmp_path: Path) -> None:
    key_file = write_pem(tmp_path / "key.pem", RSA_KEY)
    with serving(token_answer(unsigned_jwt(claims()))) as peer:
        token_source(
            {
                "sasl.oauthbearer.token.endpoint.url": peer.url,
                "sasl.oauthbearer.client.credentials.client.id": "app-1",
                "sasl.oauthbearer.assertion.private.key.file": key_file,
                "sasl.oauthbearer.assertion.claim.iss": "app-1",
                "sasl.oauthbearer.scope": "kafka",
            }
        ).fetch()
    fields = form(peer.requests[0])
    assert header(peer.requests[0], "Authorization") is None
    assert fields["grant_type"] == "client_credentials"
    assert fields["client_assertion_type"] == (
        "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    )
    assert (fields["client_id"], fields["scope"]) == ("app-1", "kafka")
    decoded = jose_jwt.decode(
        fields["client_assertion"], RSAKey.import_key(RSA_KEY.public_key()), algorithms=["RS256"]
    )
    assert decoded.claims["iss"] == "app-1"
