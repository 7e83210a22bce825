"""token_source: every OAUTHBEARER key applied or refused, sasl.jaas.config's
OAuthBearerLoginModule form, the extensions list, user callables and provider names."""

from __future__ import annotations

import base64
import datetime
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import NameOID

from kafka_sink.errors import ConfigError
from kafka_sink.net.oauth.oidc import ClientCredentialsSource, FileTokenSource, JwtBearerSource
from kafka_sink.net.oauth.sources import (
    OAUTH_SECRET_KEYS,
    OAUTH_SOURCE_KEYS,
    CallableSource,
    parse_extensions,
    token_source,
)
from kafka_sink.net.oauth.token import OAuthBearerToken, TokenSourceError
from tests.fakes.http_peer import serving
from tests.unit.net.oauth.tokens import (
    RSA_KEY,
    SECRET,
    claims,
    form,
    header,
    token_answer,
    unsigned_jwt,
    write_pem,
)

P = "sasl.oauthbearer."
PKG = "org.apache.kafka.common.security.oauthbearer."
MODULE = PKG + "OAuthBearerLoginModule"
URL = "https://idp.example/oauth2/token"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
# A quote closed too early leaves the rest of a secret where an option name is read.
MISQUOTED = f'{MODULE} required clientId="a" clientSecret="ab"cdTopSecretWord="1";'


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("oauth")
    cert_key = d / "azure.pem"
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "writer")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(RSA_KEY.public_key())
        .serial_number(1)
        .not_valid_before(datetime.datetime(2020, 1, 1))
        .not_valid_after(datetime.datetime(2040, 1, 1))
        .sign(RSA_KEY, hashes.SHA256())
    )
    write_pem(cert_key, RSA_KEY, passphrase=b"cert-pass")
    cert_key.write_bytes(cert_key.read_bytes() + cert.public_bytes(serialization.Encoding.PEM))
    (d / "template.json").write_text('{"payload": {"x": 1}}')
    (d / "assertion.jwt").write_text(unsigned_jwt({"iss": "a"}))
    return {
        "key": write_pem(d / "key.pem", RSA_KEY),
        "key_enc": write_pem(d / "key_enc.pem", RSA_KEY, passphrase=b"pw"),
        "cert": str(cert_key),
        "template": str(d / "template.json"),
        "assertion": str(d / "assertion.jwt"),
    }


def fixed_token() -> tuple[str, int]:
    """An import-path provider for the tests."""
    return "opaque-user-token", int(time.time() * 1000) + 60_000


CC = {
    P + "token.endpoint.url": URL,
    P + "client.credentials.client.id": "app",
    P + "client.credentials.client.secret": SECRET,
}
JB = {P + "token.endpoint.url": URL, P + "jwt.retriever.class": PKG + "JwtBearerJwtRetriever"}
FILE = {P + "token.endpoint.url": "file:///var/run/token.jwt"}
MSK = {P + "token.provider": "msk-iam", P + "msk.region": "eu-west-1"}
AZ = {P + "token.provider": "azure", P + "scope": "https://ns1.servicebus.windows.net/.default"}
GOOGLE = {P + "token.provider": "google"}
CALL = {P + "token.provider": "tests.unit.net.oauth.test_sources:fixed_token"}


def jb(files: dict[str, str]) -> dict[str, object]:
    return {**JB, P + "assertion.private.key.file": files["key"]}


# key -> (settings applying it, settings where nothing uses it or the value is refused)
Case = tuple[
    Callable[[dict[str, str]], dict[str, object]], Callable[[dict[str, str]], dict[str, object]]
]


def _cases() -> dict[str, Case]:
    def applied(
        base: dict[str, object] | Callable[[dict[str, str]], dict[str, object]], **kv: Any
    ) -> Callable[[dict[str, str]], dict[str, object]]:
        def build(f: dict[str, str]) -> dict[str, object]:
            start = base(f) if callable(base) else dict(base)
            return {**start, **{k: (v(f) if callable(v) else v) for k, v in kv.items()}}

        return build

    def key(k: str, v: object, base: Any, elsewhere: Any, bad: object = None) -> tuple[str, Case]:
        refused = applied(elsewhere, **{k: v if bad is None else bad})
        return k, (applied(base, **{k: v}), refused)

    def a(name: str) -> str:
        return P + "assertion." + name

    cert = lambda f: f["cert"]  # noqa: E731
    return dict(
        [
            key(P + "token.endpoint.url", URL, CC, MSK),
            key(P + "client.credentials.client.id", "app", CC, jb),
            key(P + "client.credentials.client.secret", SECRET, CC, jb),
            key(P + "scope", "kafka", CC, MSK),
            key(P + "token.provider", "msk-iam", MSK, CC, bad="no-such-provider"),
            key(P + "extensions", "logicalCluster=lkc-1", CC, CC, bad="logicalCluster"),
            key(
                P + "jwt.retriever.class",
                PKG + "ClientCredentialsJwtRetriever",
                CC,
                CC,
                bad="com.example.Retriever",
            ),
            key("sasl.login.connect.timeout.ms", 5000, CC, FILE),
            key("sasl.login.read.timeout.ms", "5000", CC, FILE),
            key(P + "header.urlencode", "true", CC, jb),
            key(
                P + "jwt.validator.class",
                PKG + "ClientJwtValidator",
                CC,
                CC,
                bad=PKG + "BrokerJwtValidator",
            ),
            key(P + "sub.claim.name", "client_id", CC, MSK),
            key(P + "scope.claim.name", "scp", CC, GOOGLE),
            key(P + "expected.audience", "kafka,other", CC, CALL),
            key(P + "expected.issuer", "https://idp.example", FILE, MSK),
            key(
                "sasl.login.callback.handler.class",
                PKG + "OAuthBearerLoginCallbackHandler",
                CC,
                CC,
                bad="com.example.Handler",
            ),
            key(
                "sasl.login.class",
                PKG + "internals.OAuthBearerRefreshingLogin",
                CC,
                CC,
                bad="com.example.Login",
            ),
            key(a("algorithm"), "RS256", jb, CC),
            key(a("claim.aud"), "https://idp", jb, CC),
            key(a("claim.exp.seconds"), 600, jb, CC),
            key(a("claim.iss"), "app", jb, CC),
            key(a("claim.jti.include"), "true", jb, CC),
            key(a("claim.nbf.seconds"), 30, jb, CC),
            key(a("claim.sub"), "app", jb, CC),
            key(a("file"), lambda f: f["assertion"], JB, CC),
            key(a("private.key.file"), lambda f: f["key"], JB, CC),
            key(
                a("private.key.passphrase"),
                "pw",
                applied(jb, **{a("private.key.file"): lambda f: f["key_enc"]}),
                CC,
            ),
            key(a("template.file"), lambda f: f["template"], jb, CC),
            key(P + "msk.region", "eu-west-1", MSK, CC),
            key(P + "msk.profile", "writer", MSK, CC),
            key(P + "msk.role.arn", "arn:aws:iam::123456789012:role/writer", MSK, CC),
            key(
                P + "msk.role.session.name",
                "s1",
                applied(MSK, **{P + "msk.role.arn": "arn:aws:iam::1:role/r"}),
                CC,
            ),
            key(P + "azure.tenant.id", "tenant-1", AZ, CC),
            key(
                P + "azure.certificate.file",
                cert,
                applied(
                    AZ,
                    **{
                        P + "azure.tenant.id": "t",
                        P + "client.credentials.client.id": "app",
                        P + "azure.certificate.password": "cert-pass",
                    },
                ),
                CC,
            ),
            key(
                P + "azure.certificate.password",
                "cert-pass",
                applied(
                    AZ,
                    **{
                        P + "azure.tenant.id": "t",
                        P + "client.credentials.client.id": "app",
                        P + "azure.certificate.file": cert,
                    },
                ),
                CC,
            ),
            key(P + "jwks.endpoint.url", "https://idp/jwks", None, CC),
            key(P + "jwks.endpoint.refresh.ms", 1000, None, CC),
            key(P + "jwks.endpoint.retry.backoff.ms", 100, None, CC),
            key(P + "jwks.endpoint.retry.backoff.max.ms", 1000, None, CC),
            key(P + "clock.skew.seconds", 30, None, CC),
        ]
    )


CASES = _cases()
BROKER_ONLY = {k for k in OAUTH_SOURCE_KEYS if ".jwks." in k or k.endswith("clock.skew.seconds")}


def test_every_key_has_a_case() -> None:
    assert set(CASES) == OAUTH_SOURCE_KEYS
    assert OAUTH_SECRET_KEYS <= OAUTH_SOURCE_KEYS


@pytest.mark.parametrize("key", sorted(OAUTH_SOURCE_KEYS))
def test_every_key_is_applied_or_refused_by_name(key: str, files: dict[str, str]) -> None:
    applied, refused = CASES[key]
    if key not in BROKER_ONLY:
        token_source(applied(files))
    with pytest.raises(ConfigError) as info:
        token_source(refused(files))
    assert key in str(info.value)
    assert SECRET not in str(info.value)


def test_keys_change_what_the_client_credentials_source_sends() -> None:
    jwt = unsigned_jwt(claims(sub=None, client_id="app", aud="kafka", scp="kafka.write"))
    with serving(token_answer(jwt)) as peer:
        source = token_source(
            {
                **CC,
                P + "token.endpoint.url": peer.url + "/t",
                P + "scope": "kafka.write",
                P + "sub.claim.name": "client_id",
                P + "scope.claim.name": "scp",
                P + "expected.audience": "kafka",
                P + "extensions": "logicalCluster=lkc-9, identityPoolId=pool-2",
            }
        )
        token = source.fetch()
    assert isinstance(source, ClientCredentialsSource)
    assert form(peer.requests[0])["scope"] == "kafka.write"
    assert token.principal == "app"
    assert token.extensions == {"logicalCluster": "lkc-9", "identityPoolId": "pool-2"}


def test_which_source_the_settings_describe(files: dict[str, str]) -> None:
    assert isinstance(token_source(CC), ClientCredentialsSource)
    assert isinstance(token_source(jb(files)), JwtBearerSource)
    assert isinstance(token_source(FILE), FileTokenSource)
    assert isinstance(
        token_source({**FILE, P + "jwt.retriever.class": "FileJwtRetriever"}), FileTokenSource
    )
    assert isinstance(token_source(CALL), CallableSource)
    with pytest.raises(ConfigError, match=r"needs a token source"):
        token_source({})
    with pytest.raises(ConfigError, match=r"FileJwtRetriever reads a file"):
        token_source({**CC, P + "jwt.retriever.class": "FileJwtRetriever"})
    with pytest.raises(ConfigError, match=r"http\(s\)://"):
        token_source({**CC, P + "token.endpoint.url": "ftp://idp/token"})
    with pytest.raises(ConfigError, match=r"credentials in the URL are not sent") as info:
        token_source({**CC, P + "token.endpoint.url": "https://app:hunter22@idp/token"})
    assert "hunter22" not in str(info.value)
    with pytest.raises(
        ConfigError, match=r"client.credentials.client.secret: the client credentials grant needs"
    ):
        token_source({P + "token.endpoint.url": URL, P + "client.credentials.client.id": "app"})
    with pytest.raises(ConfigError, match=r"needs a signing key"):
        token_source(JB)
    with pytest.raises(ConfigError, match=r"assertion.algorithm"):
        token_source({**jb(files), P + "assertion.algorithm": "HS256"})
    with pytest.raises(ConfigError, match=r"assertion.claim.exp.seconds: 86401 is out of range"):
        token_source({**jb(files), P + "assertion.claim.exp.seconds": 86401})
    with pytest.raises(ConfigError, match=r"did not load as a PEM RSA private key"):
        token_source({**JB, P + "assertion.private.key.file": files["template"]})


# -- sasl.jaas.config -----------------------------------------------------------------------------


def test_the_jaas_form_gives_client_credentials_scope_and_extensions() -> None:
    jaas = (
        f'{MODULE} required clientId="app-7" clientSecret="{SECRET}" scope="kafka" '
        'extension_logicalCluster="lkc-abc" extension_identityPoolId="pool-Xy1";'
    )
    with serving(token_answer(unsigned_jwt(claims()))) as peer:
        source = token_source({P + "token.endpoint.url": peer.url, "sasl.jaas.config": jaas})
        token = source.fetch()
    basic = base64.b64encode(f"app-7:{SECRET}".encode()).decode()
    assert header(peer.requests[0], "Authorization") == f"Basic {basic}"
    assert form(peer.requests[0])["scope"] == "kafka"
    assert token.extensions == {"logicalCluster": "lkc-abc", "identityPoolId": "pool-Xy1"}
    assert SECRET not in repr(source)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {**CC, "sasl.jaas.config": f'{MODULE} required clientId="other";'},
            r"client.id and sasl.jaas.config's clientId option are both set",
        ),
        (
            {**CC, "sasl.jaas.config": f'{MODULE} required clientSecret="{SECRET}x";'},
            r"client.secret and sasl.jaas.config's clientSecret option are both set",
        ),
        (
            {
                **CC,
                "sasl.jaas.config": f'{MODULE} required extension_a="1";',
                P + "extensions": "a=2",
            },
            r"extension 'a' is also given as sasl.jaas.config's extension_a",
        ),
        (
            {
                **CC,
                "sasl.jaas.config": PLAIN_MODULE + " required;",
            },
            r"takes .*OAuthBearerLoginModule",
        ),
        (
            {**CC, "sasl.jaas.config": f'{MODULE} required unsecuredLoginStringClaim_sub="x";'},
            r"unsecuredLoginStringClaim options make unsigned tokens",
        ),
        # A quote closed too early leaves the rest of a secret where an option name is read.
        (
            {
                P + "token.endpoint.url": URL,
                "sasl.jaas.config": MISQUOTED,
            },
            r"another option was given \(not shown",
        ),
        (
            {**FILE, "sasl.jaas.config": f'{MODULE} required clientId="a";'},
            r"option 'clientId' is not used by token file",
        ),
        (
            {**CC, "sasl.jaas.config": f'{MODULE} required extension_auth="x";'},
            r"'auth' is the token's own key",
        ),
        (
            {**CC, "sasl.jaas.config": f'{MODULE} required ssl.truststore.location="/ca.jks";'},
            r"ssl.\* options .* system's CA certificates",
        ),
    ],
)
def test_jaas_conflicts_and_unknown_options_are_refused(
    settings: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        token_source(settings)
    assert SECRET not in str(info.value)
    assert "TopSecretWord" not in str(info.value)


# -- extensions -----------------------------------------------------------------------------------


def test_the_extensions_list() -> None:
    assert parse_extensions("logicalCluster=lkc-1,identityPoolId=pool-1") == {
        "logicalCluster": "lkc-1",
        "identityPoolId": "pool-1",
    }
    assert parse_extensions(" a=x=y , ,b=with space") == {"a": "x=y", "b": "with space"}
    for bad, message in [
        ("novalue", r"entry 1 is not key=value"),
        ("a=1,b", r"entry 2 is not key=value"),
        ("lkc-1=x", r"letters only"),
        ("=x", r"letters only"),
        ("auth=x", r"'auth' is the token's own key"),
        ("a=", r"not empty"),
        ("a=caf\u00e9", r"printable ASCII"),
        ("a=1,a=2", r"given twice"),
    ]:
        with pytest.raises(ConfigError, match=message) as info:
            parse_extensions(bad)
        assert "sasl.oauthbearer.extensions" in str(info.value)


# -- user callables -------------------------------------------------------------------------------


def test_a_callable_or_import_path_provides_tokens() -> None:
    expires = int(time.time() * 1000) + 60_000
    jwt = unsigned_jwt(claims(sub="from-callable"))
    source = token_source({P + "token.provider": lambda: (jwt, expires), P + "extensions": "a=b"})
    token = source.fetch()
    assert (token.value, token.expires_at_ms, token.principal) == (jwt, expires, "from-callable")
    assert token.extensions == {"a": "b"}
    assert "lambda" in source.describe()
    by_path = token_source(CALL).fetch()
    assert by_path.value == "opaque-user-token"
    assert by_path.principal is None
    given = OAuthBearerToken("tok", expires, principal="p", extensions={"c": "d"})
    merged = token_source({P + "token.provider": lambda: given, P + "extensions": "a=b"}).fetch()
    assert merged.extensions == {"a": "b", "c": "d"} and merged.principal == "p"


@pytest.mark.parametrize(
    ("result", "message"),
    [
        (("tok", 1_700_000_000), r"looks like seconds"),
        (("tok", "soon"), r"the expiry is no int"),
        ((b"tok", 10**13), r"the token is no string"),
        (("tok with space", 10**13), r"printable ASCII"),
        ("tok", r"got str"),
        (("tok", 1_000_000_000_000), r"has expired"),
        (OAuthBearerToken("t", 10**13, extensions={"a": "other"}), r"extension 'a' differs"),
    ],
)
def test_a_callables_bad_answers_are_token_source_errors(result: object, message: str) -> None:
    source = token_source({P + "token.provider": lambda: result, P + "extensions": "a=b"})
    with pytest.raises(TokenSourceError, match=message) as info:
        source.fetch()
    assert info.value.may_clear is False


def test_a_callable_that_raises_may_clear_and_its_text_is_not_shown() -> None:
    def provider() -> tuple[str, int]:
        raise RuntimeError(f"leaked {SECRET}")

    with pytest.raises(
        TokenSourceError, match=r"token provider .*provider: raised RuntimeError"
    ) as info:
        token_source({P + "token.provider": provider}).fetch()
    assert info.value.may_clear is True
    assert SECRET not in str(info.value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("no_such_module_x:fn", r"module 'no_such_module_x' could not be imported"),
        ("tests.unit.net.oauth.test_sources:missing", r"has no 'missing'"),
        ("tests.unit.net.oauth.test_sources:P", r"is not callable"),
        (":fn", r"is not package.module:function"),
        ("kerberos", r"neither a provider \(msk-iam, azure, google\)"),
        (42, r"expected a provider name, an import path or a callable, got int"),
    ],
)
def test_bad_provider_values_are_config_errors(value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        token_source({P + "token.provider": value})


def test_provider_names_are_case_insensitive(files: dict[str, str], tmp_path: Path) -> None:
    assert "msk-iam" in token_source({**MSK, P + "token.provider": "MSK-IAM"}).describe()


def test_integers_are_read_as_javas_config_reads_them() -> None:
    def timeout_of(value: object) -> int:
        source = token_source({**CC, "sasl.login.connect.timeout.ms": value})
        return source._timeout_ms - 30_000  # type: ignore[attr-defined]

    assert timeout_of(" 5000\t") == 5000
    assert timeout_of("+7") == 7
    assert timeout_of("\uff15\uff10") == 50  # any script's decimal digits, as Java's
    for bad, message in [
        ("1_000", "expected an integer"),
        ("5e3", "expected an integer"),
        (True, "expected an integer, got bool"),
        (0, r"0 is out of range \[1, 2147483647\]"),
        ("99999999999999999999", "out of range"),
    ]:
        with pytest.raises(ConfigError, match=message):
            timeout_of(bad)
