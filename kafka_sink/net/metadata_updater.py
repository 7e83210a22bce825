"""When and where the network client refreshes metadata (Java's ``DefaultMetadataUpdater``).

Invariants: at most one Metadata request is in flight; it goes to the least loaded node (opening
a connection when none is ready); a failed or disconnected fetch counts as a failed refresh, so
the metadata's backoff applies; any disconnect makes a refresh due; an authentication failure is
recorded as fatal for callers waiting on metadata. When no known broker is even connectable, or
no update succeeded for ``metadata.recovery.rebootstrap.trigger.ms``, it returns to the
bootstrap servers (``metadata.recovery.strategy=rebootstrap``, KIP-899/KIP-1102).

It drives the client that owns it only through :class:`UpdaterClient`, the eight calls it needs
(pick a node, connect to it, send to it); the
:class:`~kafka_sink.net.network_client.NetworkClient` satisfies that protocol structurally, so
this module does not import the client, and the client imports this module.
"""

from __future__ import annotations

import logging
from typing import Protocol

from kafka_sink.errors import AuthenticationError, KafkaConnectionError, KafkaError
from kafka_sink.net.client_request import ClientRequest, ClientResponse
from kafka_sink.net.config import NetworkConfig
from kafka_sink.net.metadata import Metadata
from kafka_sink.wire.messages import MetadataRequest

__all__ = ["MetadataUpdater", "UpdaterClient"]

log = logging.getLogger(__name__)


class UpdaterClient(Protocol):
    """What the updater asks of the network client that owns it (Java's updater reaches the
    same calls as an inner class of ``NetworkClient``)."""

    def least_loaded_node(self, now_ms: int) -> int | None: ...

    def is_any_node_ready(self) -> bool: ...

    def is_any_node_connecting(self) -> bool: ...

    def can_send_request(self, node_id: int, now_ms: int) -> bool: ...

    def can_connect(self, node_id: int, now_ms: int) -> bool: ...

    def initiate_connect(self, node_id: int, now_ms: int) -> None: ...

    def connection_delay(self, node_id: int, now_ms: int) -> int: ...

    def send(self, request: ClientRequest, now_ms: int) -> None: ...


class MetadataUpdater:
    """When and where to refresh metadata (Java's ``DefaultMetadataUpdater``)."""

    def __init__(self, client: UpdaterClient, metadata: Metadata, config: NetworkConfig) -> None:
        self._client = client
        self._metadata = metadata
        self._config = config
        self.in_progress_node: int | None = None

    def is_update_due(self, now_ms: int) -> bool:
        return self.in_progress_node is None and self._metadata.time_to_next_update(now_ms) == 0

    def maybe_update(self, now_ms: int) -> int:
        """Start a refresh if one is due; returns ms until this should be asked again."""
        time_to_next = self._metadata.time_to_next_update(now_ms)
        waiting = self._config.request_timeout_ms if self.in_progress_node is not None else 0
        timeout = max(time_to_next, waiting)
        if timeout > 0:
            return timeout
        client = self._client
        rebootstrap = self._config.metadata_recovery_strategy == "rebootstrap"
        since_success = self._metadata.ms_since_successful_update(now_ms)
        if (
            rebootstrap
            and since_success is not None
            and since_success >= self._config.metadata_recovery_rebootstrap_trigger_ms
            and self._metadata.rebootstrap(now_ms)
        ):
            log.warning("no metadata update for %s ms; re-bootstrapping", since_success)
        node_id = client.least_loaded_node(now_ms)
        if (
            node_id is None
            and rebootstrap
            and not client.is_any_node_ready()
            and self._metadata.rebootstrap(now_ms)
        ):
            # Every known broker is unreachable (Java 4.x's metadata.recovery.strategy): the
            # cluster may have moved, so ask the bootstrap servers again.
            node_id = client.least_loaded_node(now_ms)
        if node_id is None:
            log.debug("no node available for a metadata request")
            return self._config.reconnect_backoff_ms
        if client.can_send_request(node_id, now_ms):
            self._send(node_id, now_ms)
            return self._config.request_timeout_ms
        if client.is_any_node_connecting():
            # Wait for that connection instead of opening more (Java does the same).
            return self._config.reconnect_backoff_ms
        if client.can_connect(node_id, now_ms):
            client.initiate_connect(node_id, now_ms)
            return self._config.reconnect_backoff_ms
        return max(client.connection_delay(node_id, now_ms), 1)

    def _send(self, node_id: int, now_ms: int) -> None:
        topics = sorted(self._metadata.topics())
        request = MetadataRequest.for_topics(
            topics, allow_auto_topic_creation=self._config.allow_auto_topic_creation
        )
        client_request = ClientRequest(node_id, request, None, now_ms, self._on_response)
        client_request.internal = True
        self.in_progress_node = node_id
        log.debug("sending metadata request for %s to node %s", topics, node_id)
        self._client.send(client_request, now_ms)

    def _on_response(self, response: ClientResponse) -> None:
        self.in_progress_node = None
        if response.response is not None:
            self._metadata.update(response.response, response.received_ms)
            return
        error = response.error or KafkaConnectionError(
            f"metadata request to node {response.request.node_id} failed"
        )
        self._metadata.failed_update(response.received_ms, error)

    def handle_server_disconnect(self, node_id: int, error: KafkaError | None, now_ms: int) -> None:
        if isinstance(error, AuthenticationError):
            self._metadata.fatal_error(error)
        elif error is not None:
            self._metadata.record_error(error)
        if self.is_update_due(now_ms):
            # No request was in flight, but the refresh we wanted could not start: back off.
            self._metadata.failed_update(now_ms, error)
        self._metadata.request_update()
