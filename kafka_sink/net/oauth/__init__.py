"""SASL/OAUTHBEARER: where tokens come from, how they are kept fresh, and how they are sent.

- ``token.py``: :class:`OAuthBearerToken` and :class:`TokenSource`, the one shape every way of
  getting a token (an OIDC endpoint, a cloud identity, the user's own callable) returns;
- ``sources.py``: :func:`token_source`, which reads a client's ``sasl.oauthbearer.*`` /
  ``sasl.login.*`` / ``sasl.jaas.config`` settings and builds the source they describe;
- ``oidc.py``: the OIDC token endpoint's sources (client credentials, KIP-1139's jwt-bearer
  grant, a token file) and the checks of what an endpoint answers;
- ``providers/``: ``msk-iam``, ``azure`` and ``google``, each behind an optional extra;
- ``mechanism.py``: the OAUTHBEARER client mechanism (RFC 7628's first message with Kafka's
  extension rules, the broker's error JSON);
- ``login.py``: :class:`OAuthBearerLogin`, one per process and configuration, which holds the
  current token and refreshes it ahead of expiry on a thread of its own (Java's refresh window,
  jitter, minimum period and buffer; bounded retries when the source fails).

Nothing here imports a socket: HTTP goes through :mod:`kafka_sink.net.http`.
"""
