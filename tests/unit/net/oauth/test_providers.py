"""The token providers: AWS MSK IAM byte for byte against aws-msk-iam-sasl-signer-python with
fixed credentials and clock, Azure and Google through test doubles of their libraries."""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import json
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from aws_msk_iam_sasl_signer import MSKAuthTokenProvider
from azure.core.credentials import AccessToken
from azure.core.exceptions import ClientAuthenticationError, ServiceRequestError

from kafka_sink.errors import ConfigError
from kafka_sink.net.oauth.providers.azure import AzureSource, event_hubs_scope
from kafka_sink.net.oauth.providers.google import DEFAULT_SCOPE, GoogleSource
from kafka_sink.net.oauth.providers.msk_iam import MskIamSource
from kafka_sink.net.oauth.sources import token_source
from kafka_sink.net.oauth.token import TokenSourceError
from tests.unit.net.oauth.tokens import claims, unsigned_jwt

P = "sasl.oauthbearer."
ACCESS_KEY = "AKIDEXAMPLE0000000001"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
SESSION_TOKEN = "FwoGZXIvYXdzEXAMPLESESSIONTOKEN"
FIXED = datetime.datetime(2026, 3, 4, 5, 6, 7)


def b64url_decode(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


# -- AWS MSK IAM ----------------------------------------------------------------------------------


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Fixed credentials in the environment, no other source, and a fixed signing clock."""
    import botocore.auth

    for name in (
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_ROLE_ARN",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION_TOKEN)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda *a, **k: FIXED)
    return tmp_path


def sigv4_signature(url: str, secret_key: str, region: str) -> str:
    """The SigV4 query signature of a pre-signed GET of ``url`` (AWS's published algorithm),
    computed here independently of botocore."""
    parsed = urllib.parse.urlsplit(url)
    params = [
        (k, v)
        for k, v in urllib.parse.parse_qsl(parsed.query, keep_blank_values=True)
        if k not in ("X-Amz-Signature", "User-Agent")
    ]
    quote = lambda s: urllib.parse.quote(s, safe="-_.~")  # noqa: E731
    canonical_query = "&".join(f"{quote(k)}={quote(v)}" for k, v in sorted(params))
    canonical = "\n".join(
        # The signer signs an empty payload's hash (not UNSIGNED-PAYLOAD).
        [
            "GET",
            "/",
            canonical_query,
            f"host:{parsed.netloc}",
            "",
            "host",
            hashlib.sha256().hexdigest(),
        ]
    )
    amz_date = dict(params)["X-Amz-Date"]
    scope = f"{amz_date[:8]}/{region}/kafka-cluster/aws4_request"
    to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = ("AWS4" + secret_key).encode()
    for part in (amz_date[:8], region, "kafka-cluster", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def test_msk_iam_token_is_the_signer_librarys_byte_for_byte(aws_env: Path) -> None:
    ours = token_source({P + "token.provider": "msk-iam", P + "msk.region": "us-east-1"}).fetch()
    theirs, theirs_expiry = MSKAuthTokenProvider.generate_auth_token("us-east-1")
    assert ours.value == theirs
    assert ours.expires_at_ms == theirs_expiry
    fixed_ms = int(FIXED.replace(tzinfo=datetime.UTC).timestamp()) * 1000
    assert ours.expires_at_ms == fixed_ms + 900_000
    assert ours.principal is None
    # And it is what MSK reads: a SigV4 pre-signed kafka-cluster:Connect URL for these keys.
    url = b64url_decode(ours.value).decode()
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))
    assert url.startswith("https://kafka.us-east-1.amazonaws.com/?")
    assert query["Action"] == "kafka-cluster:Connect"
    assert query["X-Amz-Date"] == "20260304T050607Z"
    assert query["X-Amz-Expires"] == "900"
    assert query["X-Amz-Security-Token"] == SESSION_TOKEN
    assert (
        query["X-Amz-Credential"] == f"{ACCESS_KEY}/20260304/us-east-1/kafka-cluster/aws4_request"
    )
    assert query["X-Amz-Signature"] == sigv4_signature(url, SECRET_KEY, "us-east-1")
    assert SECRET_KEY not in url


def test_msk_iam_profile(aws_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    (aws_env / "credentials").write_text(
        f"[writer]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = {SECRET_KEY}\n"
    )
    source = token_source(
        {
            P + "token.provider": "msk-iam",
            P + "msk.region": "eu-west-1",
            P + "msk.profile": "writer",
        }
    )
    ours = source.fetch()
    theirs, _ = MSKAuthTokenProvider.generate_auth_token_from_profile("eu-west-1", "writer")
    assert ours.value == theirs
    assert "AKIDPROFILE%2F" in b64url_decode(ours.value).decode()
    assert "profile writer" in source.describe()
    missing = MskIamSource(region="eu-west-1", profile="nobody")
    with pytest.raises(
        TokenSourceError, match=r"region eu-west-1, profile nobody\): ProfileNotFound"
    ) as info:
        missing.fetch()
    assert info.value.may_clear is False


def test_msk_iam_role_is_assumed_with_bounded_sts_calls(
    aws_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import botocore.credentials
    import botocore.session
    from botocore.stub import Stubber

    role = "arn:aws:iam::123456789012:role/writer"
    made: list[Any] = []
    real_create = botocore.session.Session.create_client

    def create_client(self: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        client = real_create(self, name, *args, **kwargs)
        stub = Stubber(client)
        stub.add_response(
            "assume_role",
            {
                "Credentials": {
                    "AccessKeyId": "ASIAROLE000000000001",
                    "SecretAccessKey": "role-secret-key-000000000000000000000000",
                    "SessionToken": "role-session-token",
                    "Expiration": FIXED,
                }
            },
            {"RoleArn": role, "RoleSessionName": "spark-writer"},
        )
        stub.activate()
        made.append((name, kwargs["config"]))
        return client

    monkeypatch.setattr(botocore.session.Session, "create_client", create_client)
    source = token_source(
        {
            P + "token.provider": "msk-iam",
            P + "msk.region": "us-east-1",
            P + "msk.role.arn": role,
            P + "msk.role.session.name": "spark-writer",
            "sasl.login.connect.timeout.ms": 2000,
            "sasl.login.read.timeout.ms": 3000,
        }
    )
    ours = source.fetch()
    ((name, config),) = made
    assert name == "sts"
    assert (config.connect_timeout, config.read_timeout) == (2.0, 3.0)

    class Role(botocore.credentials.CredentialProvider):  # type: ignore[misc]
        def load(self) -> Any:
            return botocore.credentials.Credentials(
                "ASIAROLE000000000001",
                "role-secret-key-000000000000000000000000",
                "role-session-token",
            )

    theirs, _ = MSKAuthTokenProvider.generate_auth_token_from_credentials_provider(
        "us-east-1", Role()
    )
    assert ours.value == theirs


def test_msk_iam_without_credentials_or_region(
    aws_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    with pytest.raises(
        TokenSourceError, match=r"msk-iam \(region us-east-1\): no AWS credentials"
    ) as info:
        MskIamSource(region="us-east-1").fetch()
    assert info.value.may_clear is False
    with pytest.raises(ConfigError, match=r"msk.region: the msk-iam provider needs"):
        token_source({P + "token.provider": "msk-iam"})
    with pytest.raises(ConfigError, match=r"role.session.name: names the session"):
        MskIamSource(region="us-east-1", role_session_name="s")


@pytest.mark.parametrize(
    ("name", "module", "extra"),
    [
        ("msk-iam", "aws_msk_iam_sasl_signer", "msk-iam"),
        ("azure", "azure.identity", "azure"),
        ("google", "google.auth", "google"),
    ],
)
def test_a_missing_library_names_the_extra(
    name: str, module: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    settings = (
        {P + "token.provider": name, P + "msk.region": "us-east-1"}
        if name == "msk-iam"
        else {
            P + "token.provider": name,
            P + "scope": "https://ns.servicebus.windows.net/.default",
        }
    )
    with pytest.raises(ConfigError, match=rf"pip install 'pykafka-sink\[{extra}\]'"):
        token_source(settings)


# -- Azure Entra ID -------------------------------------------------------------------------------


class FakeCredential:
    """A test double of an azure-identity credential: get_token(scope) -> AccessToken."""

    def __init__(self, token: str, expires_on: int, error: Exception | None = None) -> None:
        self.token, self.expires_on, self.error = token, expires_on, error
        self.scopes: list[tuple[str, ...]] = []

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        self.scopes.append(scopes)
        if self.error is not None:
            raise self.error
        return AccessToken(self.token, self.expires_on)


def test_azure_asks_the_event_hubs_scope_of_the_bootstrap_namespace() -> None:
    jwt = unsigned_jwt(claims(lifetime_s=3600, sub="oid-123", aud="https://eventhubs.azure.net"))
    expires_on = int(time.time()) + 1800
    credential = FakeCredential(jwt, expires_on)
    source = AzureSource(
        scope=None, bootstrap_servers=("MyNs.servicebus.windows.net:9093",), credential=credential
    )
    token = source.fetch()
    assert credential.scopes == [("https://myns.servicebus.windows.net/.default",)]
    assert token.value == jwt
    assert token.principal == "oid-123"
    # The credential's expires_on comes before the JWT's exp here: it wins.
    assert abs(token.expires_at_ms - expires_on * 1000) < 2_000
    assert jwt not in repr(source) + source.describe()
    assert event_hubs_scope(("broker:9092",)) is None
    with pytest.raises(ConfigError, match=r"sasl.oauthbearer.scope: the azure provider needs"):
        AzureSource(scope=None, bootstrap_servers=("broker:9092",), credential=credential)


@pytest.mark.parametrize(
    ("error", "may_clear"),
    [(ClientAuthenticationError("bad secret s3cret"), False), (ServiceRequestError("down"), True)],
)
def test_azure_credential_failures(error: Exception, may_clear: bool) -> None:
    source = AzureSource(scope="api://kafka/.default", credential=FakeCredential("", 0, error))
    with pytest.raises(
        TokenSourceError,
        match=rf"azure \(scope api://kafka/.default\): the credential raised {type(error).__name__}",  # noqa: E501
    ) as info:
        source.fetch()
    assert info.value.may_clear is may_clear
    assert "s3cret" not in str(info.value)


def test_azure_credentials_are_chosen_from_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    import azure.identity

    made: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def recorder(kind: str) -> Any:
        def make(*args: Any, **kwargs: Any) -> FakeCredential:
            made.append((kind, args, kwargs))
            return FakeCredential(unsigned_jwt(claims()), int(time.time()) + 600)

        return make

    for kind in ("DefaultAzureCredential", "ClientSecretCredential", "CertificateCredential"):
        monkeypatch.setattr(azure.identity, kind, recorder(kind))
    base = {P + "token.provider": "azure", "bootstrap.servers": "ns1.servicebus.windows.net:9093"}
    token_source({**base, P + "client.credentials.client.id": "mi-client"}).fetch()
    token_source(
        {
            **base,
            P + "azure.tenant.id": "tenant-1",
            P + "client.credentials.client.id": "app-1",
            P + "client.credentials.client.secret": "app-secret-1",
            "sasl.login.connect.timeout.ms": 4000,
        }
    ).fetch()
    token_source(
        {
            **base,
            P + "azure.tenant.id": "tenant-1",
            P + "client.credentials.client.id": "app-1",
            P + "azure.certificate.file": "/etc/app.pem",
        }
    ).fetch()
    (default, secret, cert) = made
    assert default[0] == "DefaultAzureCredential"
    assert default[2]["managed_identity_client_id"] == "mi-client"
    # The defaults: 10 s to connect, 30 s to read; the CLI gets both.
    assert (default[2]["connection_timeout"], default[2]["read_timeout"]) == (10.0, 30.0)
    assert default[2]["process_timeout"] == 40.0
    assert secret[:2] == ("ClientSecretCredential", ("tenant-1", "app-1", "app-secret-1"))
    assert secret[2]["connection_timeout"] == 4.0
    assert cert[0] == "CertificateCredential"
    assert cert[2]["certificate_path"] == "/etc/app.pem"
    with pytest.raises(ConfigError, match=r"azure.tenant.id: a client secret or certificate needs"):
        token_source(
            {
                **base,
                P + "client.credentials.client.id": "a",
                P + "client.credentials.client.secret": "s",
            }
        )


# -- Google ---------------------------------------------------------------------------------------


class FakeGoogleCredentials:
    """A test double of google-auth credentials: refresh(request) fills token and expiry."""

    def __init__(
        self,
        email: str | None = "writer@proj.iam.gserviceaccount.com",
        error: Exception | None = None,
    ) -> None:
        self.token: str | None = None
        self.expiry: datetime.datetime | None = None
        self.service_account_email = email
        self.error = error
        self.requests: list[Any] = []

    @property
    def valid(self) -> bool:
        return self.token is not None

    def refresh(self, request: Any) -> None:
        self.requests.append(request)
        if self.error is not None:
            raise self.error
        self.token = "ya29.google-access-token"
        # google-auth keeps a naive UTC expiry.
        self.expiry = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) + datetime.timedelta(
            seconds=3599
        )


def test_google_token_is_managed_kafkas_format(monkeypatch: pytest.MonkeyPatch) -> None:
    import google.auth

    credentials = FakeGoogleCredentials()
    asked: list[Any] = []

    def default(scopes: Any = None, request: Any = None, **kwargs: Any) -> tuple[Any, str]:
        asked.append(scopes)
        return credentials, "proj"

    monkeypatch.setattr(google.auth, "default", default)
    source = token_source({P + "token.provider": "google", P + "extensions": "a=b"})
    token = source.fetch()
    assert asked == [[DEFAULT_SCOPE]]
    header, payload, inner = token.value.split(".")
    assert json.loads(b64url_decode(header)) == {"typ": "JWT", "alg": "GOOG_OAUTH2_TOKEN"}
    body = json.loads(b64url_decode(payload))
    assert body["iss"] == "Google" and body["scope"] == "kafka"
    assert body["sub"] == "writer@proj.iam.gserviceaccount.com"
    assert abs(body["exp"] - (time.time() + 3599)) < 5 and abs(body["iat"] - time.time()) < 5
    assert b64url_decode(inner) == b"ya29.google-access-token"
    assert "=" not in token.value
    assert token.principal == "writer@proj.iam.gserviceaccount.com"
    assert token.expires_at_ms == int(body["exp"] * 1000)
    assert token.extensions == {"a": "b"}
    # The refresh went through the bounded transport (connect + read timeouts).
    (request,) = credentials.requests
    assert type(request).__name__ == "_Bounded"
    # A valid credential is not refreshed again.
    source.fetch()
    assert len(credentials.requests) == 1


def test_google_failures() -> None:
    import google.auth.exceptions

    no_email = GoogleSource(credentials=FakeGoogleCredentials(email=None), request=object())
    with pytest.raises(TokenSourceError, match=r"no service account email") as info:
        no_email.fetch()
    assert info.value.may_clear is False
    refused = GoogleSource(
        credentials=FakeGoogleCredentials(
            error=google.auth.exceptions.RefreshError("invalid_grant")
        ),
        request=object(),
    )
    with pytest.raises(TokenSourceError, match=r"google \(scope .*\): RefreshError") as info:
        refused.fetch()
    assert info.value.may_clear is False
    flaky = GoogleSource(
        credentials=FakeGoogleCredentials(error=google.auth.exceptions.TransportError("down")),
        request=object(),
    )
    with pytest.raises(TokenSourceError, match=r"TransportError") as info:
        flaky.fetch()
    assert info.value.may_clear is True


def test_the_msk_iam_token_travels_the_oauthbearer_path(
    aws_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import botocore.auth

    from kafka_sink.net.config import ClientConfig
    from kafka_sink.net.oauth.login import OAuthBearerLogin, source_for
    from kafka_sink.net.oauth.mechanism import OAuthBearerMechanism

    config = ClientConfig.from_mapping(
        {
            "bootstrap.servers": "b-1.cluster.kafka.us-east-1.amazonaws.com:9098",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "OAUTHBEARER",
            P + "token.provider": "msk-iam",
            P + "msk.region": "us-east-1",
            P + "extensions": "a=b",
        }
    )
    # A clock fixed at now: the login refuses tokens that have expired.
    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None, microsecond=0)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda *a, **k: now)
    login = OAuthBearerLogin(source_for(config.sasl_oauthbearer))
    first = OAuthBearerMechanism(login).initial_response()
    theirs, _ = MSKAuthTokenProvider.generate_auth_token("us-east-1")
    assert first == b"n,,\x01auth=Bearer " + theirs.encode() + b"\x01a=b\x01\x01"
