"""Microsoft Entra ID tokens through ``azure-identity``, for Azure Event Hubs' Kafka endpoint.

Role: :class:`AzureSource` (``sasl.oauthbearer.token.provider=azure``) asks an
``azure-identity`` credential for a token of the scope ``sasl.oauthbearer.scope``; for Event
Hubs that is ``https://<namespace>.servicebus.windows.net/.default``, derived from
``bootstrap.servers`` (``<namespace>.servicebus.windows.net:9093``) when not given. The
credential is:

- ``ClientSecretCredential`` with ``sasl.oauthbearer.azure.tenant.id`` and the client id and
  secret (``sasl.oauthbearer.client.credentials.client.id`` / ``.client.secret``);
- ``CertificateCredential`` with the tenant, the client id and
  ``sasl.oauthbearer.azure.certificate.file`` (a PEM or PKCS12 file; its password in
  ``sasl.oauthbearer.azure.certificate.password``);
- otherwise ``DefaultAzureCredential`` (environment, workload identity, managed identity (the
  client id, when given, picks a user-assigned one), the Azure CLI ...), in the tenant
  ``sasl.oauthbearer.azure.tenant.id`` when given.

Every credential gets ``sasl.login.connect.timeout.ms`` / ``.read.timeout.ms`` as its HTTP
transport's connection and read timeouts (and their sum as the developer tools' process
timeout).

Invariants:
- The token is read like an OIDC endpoint's (:func:`~kafka_sink.net.oauth.oidc.token_from_jwt`:
  expiry, subject, the ``sasl.oauthbearer.*`` claim checks), its expiry the earlier of the JWT's
  ``exp`` and the credential's ``expires_on``.
- Errors name the provider and scope, and the library's exception type only (its text may quote
  an answer).
"""

from __future__ import annotations

import time
from typing import Any

from kafka_sink.errors import ConfigError
from kafka_sink.net.oauth.oidc import TokenChecks, token_from_jwt
from kafka_sink.net.oauth.providers import missing_extra
from kafka_sink.net.oauth.token import OAuthBearerToken, TokenSourceError

__all__ = ["EVENT_HUBS_SUFFIX", "AzureSource", "event_hubs_scope"]

EVENT_HUBS_SUFFIX = ".servicebus.windows.net"
# What a credential that will never succeed raises (no identity, bad secret or certificate).
_FINAL_ERRORS = frozenset({"ClientAuthenticationError", "CredentialUnavailableError"})


def event_hubs_scope(bootstrap_servers: tuple[str, ...]) -> str | None:
    """The Event Hubs scope of the namespace ``bootstrap.servers`` names, if it names one."""
    for server in bootstrap_servers:
        host = server.rpartition(":")[0] if ":" in server else server
        if host.lower().endswith(EVENT_HUBS_SUFFIX):
            return f"https://{host.lower()}/.default"
    return None


def _identity() -> Any:
    try:
        import azure.identity
    except ImportError:
        raise missing_extra("azure", "azure", "azure-identity") from None
    return azure.identity


class AzureSource:
    def __init__(
        self,
        *,
        scope: str | None,
        bootstrap_servers: tuple[str, ...] = (),
        tenant_id: str | None = None,
        client_id: str | None = None,
        client_secret: str | None = None,
        certificate_file: str | None = None,
        certificate_password: str | None = None,
        checks: TokenChecks | None = None,
        connect_timeout_ms: int = 10_000,
        read_timeout_ms: int = 30_000,
        credential: Any = None,
    ) -> None:
        scope = scope or event_hubs_scope(bootstrap_servers)
        if not scope:
            raise ConfigError(
                "sasl.oauthbearer.scope: the azure provider needs the scope to ask for (for Event "
                "Hubs: https://<namespace>.servicebus.windows.net/.default)"
            )
        self._scope = scope
        self._checks = checks or TokenChecks()
        if credential is None:
            credential = _credential(
                tenant_id,
                client_id,
                client_secret,
                certificate_file,
                certificate_password,
                connection_timeout=connect_timeout_ms / 1000,
                read_timeout=read_timeout_ms / 1000,
            )
        self._credential = credential

    def describe(self) -> str:
        return f"token provider azure (scope {self._scope})"

    def __repr__(self) -> str:
        return f"AzureSource({self._scope!r})"

    def fetch(self) -> OAuthBearerToken:
        where = self.describe()
        try:
            got = self._credential.get_token(self._scope)
        except Exception as exc:
            kind = type(exc).__name__
            raise TokenSourceError(
                f"{where}: the credential raised {kind}", may_clear=kind not in _FINAL_ERRORS
            ) from None
        now_ms = int(time.time() * 1000)
        expires_on = getattr(got, "expires_on", None)
        if isinstance(expires_on, bool) or not isinstance(expires_on, int):
            raise TokenSourceError(
                f"{where}: the credential's expires_on is no int", may_clear=False
            )
        token = getattr(got, "token", None)
        if not isinstance(token, str):
            raise TokenSourceError(f"{where}: the credential's token is no string", may_clear=False)
        return token_from_jwt(
            token,
            source=where,
            checks=self._checks,
            expires_in_ms=expires_on * 1000 - now_ms,
            now_ms=now_ms,
        )


def _credential(
    tenant_id: str | None,
    client_id: str | None,
    client_secret: str | None,
    certificate_file: str | None,
    certificate_password: str | None,
    **transport: float,
) -> Any:
    identity = _identity()
    if client_secret is not None or certificate_file is not None:
        if client_secret is not None and certificate_file is not None:
            raise ConfigError(
                "sasl.oauthbearer.azure.certificate.file and "
                "sasl.oauthbearer.client.credentials.client.secret are both set: give one"
            )
        if tenant_id is None or client_id is None:
            missing = (
                "sasl.oauthbearer.azure.tenant.id"
                if tenant_id is None
                else "sasl.oauthbearer.client.credentials.client.id"
            )
            raise ConfigError(
                f"{missing}: a client secret or certificate needs the tenant id and client id"
            )
        if client_secret is not None:
            return identity.ClientSecretCredential(tenant_id, client_id, client_secret, **transport)
        return identity.CertificateCredential(
            tenant_id,
            client_id,
            certificate_path=certificate_file,
            password=certificate_password,
            **transport,
        )
    if certificate_password is not None:
        raise ConfigError(
            "sasl.oauthbearer.azure.certificate.password: set without "
            "sasl.oauthbearer.azure.certificate.file"
        )
    # The Azure CLI and other developer tools run as processes: bounded like the HTTP calls.
    kwargs: dict[str, Any] = {
        "process_timeout": transport["connection_timeout"] + transport["read_timeout"],
        **transport,
    }
    if tenant_id is not None:
        kwargs["additionally_allowed_tenants"] = [tenant_id]
        for name in (
            "workload_identity_tenant_id",
            "shared_cache_tenant_id",
            "visual_studio_code_tenant_id",
            "broker_tenant_id",
        ):
            kwargs[name] = tenant_id
    if client_id is not None:
        kwargs["managed_identity_client_id"] = client_id
        kwargs["workload_identity_client_id"] = client_id
    return identity.DefaultAzureCredential(**kwargs)
