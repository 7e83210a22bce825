"""The Kafka wire protocol, pure: bytes in, bytes out.

``primitives`` (Writer/Reader), ``schema`` (declarative fields + the generic codec), ``api``
(ApiKey, supported versions, negotiation), ``messages`` (one dataclass per request/response),
``protocol`` (headers: the entry point for the network layer) and ``framing`` (size prefixes).
Nothing here imports socket, selectors, ssl, threading or time.
"""
