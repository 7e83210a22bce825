"""Which :class:`~kafka_sink.net.oauth.token.TokenSource` a client's settings describe.

Role: :func:`token_source` reads the OAUTHBEARER settings of one client (Kafka's dotted keys, as
the Java client names them: ``sasl.oauthbearer.token.endpoint.url``, the client credentials,
``sasl.oauthbearer.scope``, the ``sasl.login.*`` connect/read timeouts and retry backoff, the
jwt-bearer assertion keys, ``sasl.jaas.config``'s ``OAuthBearerLoginModule`` form with
``extension_<name>`` options, librdkafka's ``sasl.oauthbearer.extensions`` list, and
``sasl.oauthbearer.token.provider``: a short name such as ``msk-iam``, ``azure``, ``google``, or
a Python callable / import path returning a token and its expiry) and builds the source.

Invariants:
- Every key it reads is applied or refused with :class:`~kafka_sink.errors.ConfigError` naming
  the key; none is accepted and ignored; no secret is quoted.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafka_sink.net.oauth.token import TokenSource

__all__ = ["OAUTH_SOURCE_KEYS", "token_source"]

#: Every dotted key :func:`token_source` reads (the client config accepts them with
#: ``sasl.mechanism=OAUTHBEARER`` only, and refuses them otherwise).
OAUTH_SOURCE_KEYS: frozenset[str] = frozenset()


def token_source(settings: Mapping[str, object]) -> TokenSource:
    """The token source ``settings`` (a client's dotted keys) describe."""
    raise NotImplementedError
