"""Token providers for identities that are not OIDC token endpoints, by short name.

- ``msk_iam.py`` (``msk-iam``): AWS MSK IAM, signed by ``aws-msk-iam-sasl-signer-python``
  (extra ``pykafka-sink[msk-iam]``);
- ``azure.py`` (``azure``): Microsoft Entra ID through ``azure-identity``, for Event Hubs
  (extra ``pykafka-sink[azure]``);
- ``google.py`` (``google``): Google Cloud credentials through ``google-auth``, in the token
  format Google's Managed Service for Apache Kafka reads (extra ``pykafka-sink[google]``).

Each module imports its library when a source is built, never at import time, and a missing
library is a :class:`~kafka_sink.errors.ConfigError` naming the extra to install.
"""

from __future__ import annotations

from kafka_sink.errors import ConfigError

__all__ = ["missing_extra"]


def missing_extra(provider: str, extra: str, module: str) -> ConfigError:
    """The error for a provider whose library is not installed."""
    return ConfigError(
        f"sasl.oauthbearer.token.provider={provider} needs {module}: "
        f"pip install 'pykafka-sink[{extra}]'"
    )
