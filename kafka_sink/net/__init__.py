"""The network layer: the only package that touches sockets, selectors and TLS.

Module map (bottom to top):

- ``selector``: non-blocking TCP/TLS channels over ``selectors.DefaultSelector`` with a
  socketpair wakeup; moves opaque bytes, knows nothing of Kafka.
- ``oauth``: SASL/OAUTHBEARER: the token and its sources, the RFC 7628 mechanism, and the login
  that keeps one token per process and configuration refreshed on its own thread.
- ``sasl``: PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER client mechanisms as pure token exchanges.
- ``jaas``: the ``sasl.jaas.config`` syntax, tokenized as Java's ``JaasConfig`` does.
- ``tls``: ``TlsConfig``, Kafka's ``ssl.*`` settings applied to an ``ssl.SSLContext`` (or refused),
  and the wording of TLS handshake failures.
- ``connection``: sans-IO ``BrokerConnection`` (framing, correlation ids, in-flight FIFO,
  ApiVersions negotiation, SASL handshake); bytes in, bytes out.
- ``metadata``: thread-safe cluster ``Metadata`` (brokers, leaders and epochs, topic errors,
  refresh timing) and ``ExponentialBackoff``.
- ``config``: ``ClientConfig``, the dotted keys every client shares (Java's
  ``CommonClientConfigs``), and the ``NetworkConfig`` it builds for the network client.
- ``client_request``: ``ClientRequest`` / ``ClientResponse``.
- ``metadata_updater``: when and where to refresh metadata.
- ``network_client``: ``NetworkClient``, which ties them together on the sender thread.
- ``http``: one bounded HTTP(S) exchange over ``urllib`` (PEM TLS settings, secret headers kept
  off redirects), for the driver's REST clients such as the Schema Registry client.
- ``presets``: the managed services' named presets (``msk-iam``, ``confluent-cloud``,
  ``event-hubs``, ``google``): the settings each documents, filled in where a client's config
  leaves them out, and its limits refused.
- ``user_info``: credentials in URLs split off as HTTP clients read them, or refused; URLs
  masked for display; user values quoted capped in error messages.
"""
