"""Network settings of a client: the producer config's network keys, parsed and validated.

Invariants: secrets (SASL password, TLS key material and passwords) never appear in ``repr``;
a ``NetworkConfig`` that constructs without error names a supported security protocol, for
SASL_* a mechanism, and for *SSL TLS settings that :class:`~kafka_sink.net.tls.TlsConfig`
accepted (files are read only when the context is built).
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from dataclasses import dataclass, field

from kafka_sink.errors import ConfigError
from kafka_sink.net.sasl import SaslConfig
from kafka_sink.net.tls import TlsConfig

__all__ = ["NetworkConfig", "parse_bootstrap_servers"]

_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def parse_bootstrap_servers(
    servers: str | Sequence[str | tuple[str, int]],
) -> list[tuple[str, int]]:
    """``"h1:9092,h2:9092"`` or a sequence of ``"host:port"`` / ``(host, port)`` -> pairs."""
    items: Sequence[str | tuple[str, int]] = (
        [s for s in servers.split(",") if s.strip()] if isinstance(servers, str) else servers
    )
    out: list[tuple[str, int]] = []
    for item in items:
        if isinstance(item, tuple):
            host, port = item
        else:
            text = item.strip()
            host, sep, port_text = text.rpartition(":")
            if not sep or not host or not port_text.isdigit():
                raise ConfigError(f"bootstrap.servers entry {text!r} is not host:port")
            host, port = host.strip("[]"), int(port_text)
        if not 0 < int(port) < 65536:
            raise ConfigError(f"bootstrap.servers entry {host}:{port} has an invalid port")
        out.append((str(host), int(port)))
    if not out:
        raise ConfigError("bootstrap.servers is empty")
    return out


@dataclass
class NetworkConfig:
    """Network settings, built from the producer config (Kafka key in each comment)."""

    bootstrap_servers: Sequence[tuple[str, int]] | Sequence[str] | str  # bootstrap.servers
    client_id: str | None = None  # client.id
    request_timeout_ms: int = 30_000  # request.timeout.ms
    reconnect_backoff_ms: int = 50  # reconnect.backoff.ms
    reconnect_backoff_max_ms: int = 1_000  # reconnect.backoff.max.ms
    max_in_flight: int = 5  # max.in.flight.requests.per.connection
    send_buffer_bytes: int = 131_072  # send.buffer.bytes (-1: OS default)
    receive_buffer_bytes: int = 32_768  # receive.buffer.bytes (-1: OS default)
    connections_max_idle_ms: int = 540_000  # connections.max.idle.ms
    socket_connection_setup_timeout_ms: int = 10_000  # socket.connection.setup.timeout.ms
    socket_connection_setup_timeout_max_ms: int = 30_000  # ...setup.timeout.max.ms
    security_protocol: str = "PLAINTEXT"  # security.protocol
    sasl_mechanism: str | None = None  # sasl.mechanism (None unless SASL_*)
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    tls: TlsConfig | None = None  # the ssl.* keys (None with *SSL: system CAs, Java defaults)
    max_frame_size: int = 100 * 1024 * 1024  # largest response frame accepted
    # Refresh timing lives in the Metadata object (built with these same values by the producer);
    # kept here so one object describes the client's whole network configuration.
    metadata_max_age_ms: int = 300_000  # metadata.max.age.ms
    retry_backoff_ms: int = 100  # retry.backoff.ms
    retry_backoff_max_ms: int = 1_000  # retry.backoff.max.ms
    allow_auto_topic_creation: bool = False  # the producer creates topics itself, or not at all
    metadata_recovery_strategy: str = "rebootstrap"  # metadata.recovery.strategy (or "none")
    metadata_recovery_rebootstrap_trigger_ms: int = 300_000  # ...recovery.rebootstrap.trigger.ms

    def __post_init__(self) -> None:
        self.security_protocol = self.security_protocol.upper()
        if self.security_protocol not in _SECURITY_PROTOCOLS:
            raise ConfigError(
                f"security.protocol {self.security_protocol!r} is not one of "
                f"{', '.join(_SECURITY_PROTOCOLS)}"
            )
        self.metadata_recovery_strategy = self.metadata_recovery_strategy.lower()
        if self.metadata_recovery_strategy not in ("rebootstrap", "none"):
            raise ConfigError(
                f"metadata.recovery.strategy {self.metadata_recovery_strategy!r} is not "
                "'rebootstrap' or 'none'"
            )
        if self.max_in_flight < 1:
            raise ConfigError("max.in.flight.requests.per.connection must be at least 1")
        if self.uses_sasl and not self.sasl_mechanism:
            raise ConfigError(f"security.protocol {self.security_protocol} needs sasl.mechanism")
        if self.tls is not None and not self.uses_ssl:
            raise ConfigError(
                f"ssl.* settings need security.protocol SSL or SASL_SSL, "
                f"not {self.security_protocol}"
            )

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def uses_ssl(self) -> bool:
        return self.security_protocol.endswith("SSL")

    def sasl_config(self) -> SaslConfig | None:
        if not self.uses_sasl:
            return None
        assert self.sasl_mechanism is not None
        return SaslConfig(self.sasl_mechanism, self.sasl_username or "", self.sasl_password or "")

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS client context (see :class:`~kafka_sink.net.tls.TlsConfig`), or None."""
        if not self.uses_ssl:
            return None
        return (self.tls or TlsConfig()).create_context()
