"""AWS MSK IAM: OAUTHBEARER tokens signed by ``aws-msk-iam-sasl-signer-python``.

Role: :class:`MskIamSource` (``sasl.oauthbearer.token.provider=msk-iam``) loads AWS credentials
and has the signer library sign them into MSK's token: a SigV4 pre-signed
``kafka-cluster:Connect`` URL, base64url-encoded, valid for 15 minutes. Settings:

- ``sasl.oauthbearer.msk.region`` (required): the cluster's AWS region;
- ``sasl.oauthbearer.msk.profile``: a named profile of the shared AWS config files;
- ``sasl.oauthbearer.msk.role.arn``: a role to assume (with the credentials of the profile, or
  of the default chain) and ``sasl.oauthbearer.msk.role.session.name`` (default
  ``MSKSASLDefaultSession``, the library's);
- none of them: botocore's default credential chain (environment, shared files, container and
  instance roles, web identity).

Invariants:
- The token is the library's own (``generate_auth_token_from_credentials_provider``), so it is
  byte for byte what the library signs for the same credentials and clock; only where the
  credentials come from is done here, so that the STS call of a role is bounded by
  ``sasl.login.connect.timeout.ms`` / ``.read.timeout.ms`` and made once per fetch.
- Errors name the provider and the region, profile or role, never a key or session token.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka_sink.errors import ConfigError
from kafka_sink.net.oauth.providers import missing_extra
from kafka_sink.net.oauth.token import OAuthBearerToken, TokenSourceError
from kafka_sink.net.user_info import shown_value

__all__ = ["DEFAULT_SESSION_NAME", "MskIamSource"]

DEFAULT_SESSION_NAME = "MSKSASLDefaultSession"
# Failures that the same settings will meet again (no credentials, an unknown profile, STS
# refusing the role); anything else (a network error) may clear.
_FINAL_ERRORS = frozenset(
    {"NoCredentialsError", "ProfileNotFound", "PartialCredentialsError", "ClientError"}
)


def _signer() -> Any:
    try:
        from aws_msk_iam_sasl_signer import MSKAuthTokenProvider
    except ImportError:
        raise missing_extra("msk-iam", "msk-iam", "aws-msk-iam-sasl-signer-python") from None
    return MSKAuthTokenProvider


class MskIamSource:
    def __init__(
        self,
        *,
        region: str | None,
        profile: str | None = None,
        role_arn: str | None = None,
        role_session_name: str | None = None,
        extensions: Mapping[str, str] | None = None,
        connect_timeout_ms: int = 10_000,
        read_timeout_ms: int = 30_000,
    ) -> None:
        if not region:
            raise ConfigError(
                "sasl.oauthbearer.msk.region: the msk-iam provider needs the cluster's AWS "
                "region (e.g. us-east-1)"
            )
        if role_session_name is not None and role_arn is None:
            raise ConfigError(
                "sasl.oauthbearer.msk.role.session.name: names the session of "
                "sasl.oauthbearer.msk.role.arn, which is not set"
            )
        self._signer = _signer()
        self._region = region
        self._profile = profile
        self._role_arn = role_arn
        self._session_name = role_session_name or DEFAULT_SESSION_NAME
        self._extensions = dict(extensions or {})
        self._connect_s = connect_timeout_ms / 1000
        self._read_s = read_timeout_ms / 1000
        self._session: Any = None

    def describe(self) -> str:
        where = [f"region {self._region}"]
        if self._profile:
            where.append(f"profile {self._profile}")
        if self._role_arn:
            where.append(f"role {self._role_arn}")
        return f"token provider msk-iam ({', '.join(where)})"

    def __repr__(self) -> str:
        return f"MskIamSource({self.describe()!r})"

    def _credentials(self) -> Any:
        import botocore.config
        import botocore.credentials
        import botocore.session

        if self._session is None:
            # One session per source: the default chain's refreshable credentials are cached.
            self._session = botocore.session.Session(profile=self._profile)
        if self._role_arn is None:
            return self._session.get_credentials()
        config = botocore.config.Config(
            connect_timeout=self._connect_s,
            read_timeout=self._read_s,
            retries={"max_attempts": 1},
        )
        sts = self._session.create_client("sts", region_name=self._region, config=config)
        answer = sts.assume_role(RoleArn=self._role_arn, RoleSessionName=self._session_name)
        got = answer["Credentials"]
        return botocore.credentials.Credentials(
            got["AccessKeyId"], got["SecretAccessKey"], got["SessionToken"]
        )

    def fetch(self) -> OAuthBearerToken:
        import botocore.credentials

        where = self.describe()
        try:
            credentials = self._credentials()
            if credentials is None:
                raise TokenSourceError(
                    f"{where}: no AWS credentials found (environment, profile, instance or "
                    "container role)",
                    may_clear=False,
                )

            class _Given(botocore.credentials.CredentialProvider):  # type: ignore[misc]
                METHOD = "pykafka-sink"

                def load(self) -> Any:
                    return credentials

            token, expires_at_ms = self._signer.generate_auth_token_from_credentials_provider(
                self._region, _Given()
            )
        except TokenSourceError:
            raise
        except Exception as exc:
            kind = type(exc).__name__
            # botocore's messages name profiles, roles and operations, never keys.
            detail = shown_value(str(exc), 200) if kind in _FINAL_ERRORS else repr(kind)
            raise TokenSourceError(
                f"{where}: {kind}: {detail}", may_clear=kind not in _FINAL_ERRORS
            ) from None
        return OAuthBearerToken(
            str(token), int(expires_at_ms), principal=None, extensions=dict(self._extensions)
        )
