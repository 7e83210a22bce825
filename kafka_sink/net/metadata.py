"""Cluster metadata: brokers, partition leaders with their epochs, topic errors, refresh timing.

Role: the producer's view of the cluster (Java's ``ProducerMetadata``). The sender thread writes it
(:meth:`Metadata.update` from Metadata responses, :meth:`Metadata.update_leader` from Produce v10+
leader hints, :meth:`Metadata.failed_update`); caller threads read it and may block in
:meth:`Metadata.await_update` until a newer version lands. The network client's metadata updater
asks :meth:`Metadata.time_to_next_update` when to fetch next.

Invariants:

- Every public method is thread-safe. Readers get an immutable :class:`Cluster` snapshot that is
  swapped as a whole, so a reader never sees half an update.
- ``version`` grows by one on every accepted change (full update or leader hint), and
  :meth:`await_update` returns once the version passed the one the caller saw.
- A partition's leader never moves back to an older leader epoch: a response (or hint) carrying
  a lower epoch than the cached one leaves the cached partition as it is.
- Refreshes are spaced by ``retry.backoff.ms`` (growing exponentially, with jitter, up to
  ``retry.backoff.max.ms`` while attempts keep failing) and happen at least every
  ``metadata.max.age.ms``.
- A topic added with a time expires ``metadata.max.idle.ms`` after its last use: the first update
  at or after that drops it (and its partitions), so later requests no longer name it. A use
  without a time never shortens or removes an expiry; a topic added without one never expires.
- Bootstrap nodes get negative ids (-1, -2, ...) and are replaced by the real brokers on the first
  successful update; :meth:`Metadata.rebootstrap` returns to them (keeping the partitions, whose
  leaders then stay unknown until the next update) when no known broker can be reached.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from kafka_sink.errors import (
    KafkaError,
    KafkaTimeoutError,
    ProducerClosedError,
    error_for_code,
)

__all__ = [
    "Cluster",
    "ExponentialBackoff",
    "Metadata",
    "Node",
    "PartitionInfo",
]

log = logging.getLogger(__name__)

_LEADER_NOT_AVAILABLE = 5
_REBOOTSTRAP_REQUIRED = 129


@dataclass(frozen=True, slots=True)
class Node:
    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def is_bootstrap(self) -> bool:
        return self.node_id < 0


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    leader_id: int  # -1: no leader right now
    leader_epoch: int  # -1: unknown
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()


@dataclass(frozen=True)
class Cluster:
    """An immutable snapshot; :class:`Metadata` swaps whole snapshots."""

    brokers: Mapping[int, Node] = field(default_factory=lambda: MappingProxyType({}))
    partitions: Mapping[str, tuple[PartitionInfo, ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    topic_errors: Mapping[str, KafkaError] = field(default_factory=lambda: MappingProxyType({}))
    cluster_id: str | None = None
    controller_id: int = -1
    is_bootstrap: bool = False

    def leader_for(self, topic: str, partition: int) -> Node | None:
        parts = self.partitions.get(topic)
        if parts is None or not 0 <= partition < len(parts):
            return None
        info = parts[partition]
        if info.partition != partition:  # holes are impossible in Kafka, but stay correct
            info = next((p for p in parts if p.partition == partition), info)
        if info.partition != partition or info.leader_id < 0:
            return None
        return self.brokers.get(info.leader_id)


class ExponentialBackoff:
    """Java's ``ExponentialBackoff``: ``initial * 2**attempts``, capped, with +-``jitter``."""

    __slots__ = ("_initial_ms", "_jitter", "_max_ms", "_random")

    def __init__(
        self,
        initial_ms: int,
        max_ms: int,
        *,
        jitter: float = 0.2,
        rng: random.Random | None = None,
    ) -> None:
        self._initial_ms = max(initial_ms, 0)
        self._max_ms = max(max_ms, self._initial_ms)
        self._jitter = jitter
        self._random = rng or random.Random()

    def backoff_ms(self, attempts: int) -> int:
        if self._initial_ms == 0:
            return 0
        term = self._initial_ms * (2 ** min(max(attempts, 0), 62))
        term = min(term, self._max_ms)
        if self._jitter > 0:
            term = term * self._random.uniform(1 - self._jitter, 1 + self._jitter)
        return min(int(term), self._max_ms)


class Metadata:
    """Thread-safe cluster metadata for a producer (Java ``ProducerMetadata`` semantics)."""

    def __init__(
        self,
        *,
        metadata_max_age_ms: int = 300_000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1_000,
        metadata_max_idle_ms: int | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.metadata_max_age_ms = metadata_max_age_ms
        self.metadata_max_idle_ms = metadata_max_idle_ms
        self._backoff = ExponentialBackoff(retry_backoff_ms, retry_backoff_max_ms, rng=rng)
        self._cond = threading.Condition(threading.Lock())
        self._cluster = Cluster()
        self._bootstrap_nodes: tuple[Node, ...] = ()
        # topic -> when it expires (metadata.max.idle.ms after its last use), None: never.
        self._topics: dict[str, int | None] = {}
        self._version = 0
        self._need_update = True
        self._last_refresh_ms: int | None = None
        self._last_successful_refresh_ms: int | None = None
        self._failed_attempts = 0
        self._last_error: KafkaError | None = None
        self._fatal_error: KafkaError | None = None
        self._closed = False

    # ------------------------------------------------------------------ setup

    def bootstrap(self, addresses: Sequence[tuple[str, int]]) -> None:
        """Start from the bootstrap servers, as nodes -1, -2, ... (resolved at connect time)."""
        nodes = tuple(Node(-(i + 1), host, port) for i, (host, port) in enumerate(addresses))
        with self._cond:
            self._bootstrap_nodes = nodes
            self._cluster = Cluster(
                brokers=MappingProxyType({n.node_id: n for n in nodes}), is_bootstrap=True
            )
            self._need_update = True
            self._cond.notify_all()

    def add_topic(self, topic: str, now_ms: int | None = None) -> bool:
        """Track ``topic``; a new topic makes an update due. Returns True if it was new.

        With ``metadata_max_idle_ms`` set and ``now_ms`` given, this also marks the topic as
        used: a topic not used for that long is dropped at the next update (Java's
        ``metadata.max.idle.ms``). Topics added without ``now_ms`` never expire.
        """
        expires = (
            None
            if now_ms is None or self.metadata_max_idle_ms is None
            else now_ms + self.metadata_max_idle_ms
        )
        with self._cond:
            if topic in self._topics:
                # A topic that never expires stays so; a use without a time keeps the expiry.
                if self._topics[topic] is not None and expires is not None:
                    self._topics[topic] = expires
                return False
            self._topics[topic] = expires
            self._need_update = True
            # Java's requestUpdateForNewTopics: a new topic should not wait out a long backoff.
            self._failed_attempts = 0
            self._last_refresh_ms = None
            return True

    def topics(self) -> frozenset[str]:
        with self._cond:
            return frozenset(self._topics)

    # ------------------------------------------------------------------ reads

    @property
    def version(self) -> int:
        with self._cond:
            return self._version

    def fetch(self) -> Cluster:
        """The current snapshot (immutable; safe to keep and read without locks)."""
        with self._cond:
            return self._cluster

    def nodes(self) -> list[Node]:
        with self._cond:
            return list(self._cluster.brokers.values())

    def node(self, node_id: int) -> Node | None:
        with self._cond:
            found = self._cluster.brokers.get(node_id)
            if found is None and node_id < 0:
                # A bootstrap connection can outlive the bootstrap snapshot.
                found = next((n for n in self._bootstrap_nodes if n.node_id == node_id), None)
            return found

    def partitions_for(self, topic: str) -> list[PartitionInfo] | None:
        """Partitions of ``topic`` (indexed by partition number) or None when unknown."""
        with self._cond:
            parts = self._cluster.partitions.get(topic)
        return None if parts is None else list(parts)

    def leader_for(self, topic: str, partition: int) -> Node | None:
        with self._cond:
            return self._cluster.leader_for(topic, partition)

    def topic_error(self, topic: str) -> KafkaError | None:
        """The error the last update reported for ``topic`` (None when it had none)."""
        with self._cond:
            return self._cluster.topic_errors.get(topic)

    def ms_since_successful_update(self, now_ms: int) -> int | None:
        """Time since the last accepted update (None before the first one)."""
        with self._cond:
            last = self._last_successful_refresh_ms
        return None if last is None else now_ms - last

    def last_error(self) -> KafkaError | None:
        """Why the most recent refresh attempt failed (cleared by a successful update)."""
        with self._cond:
            return self._last_error

    # ------------------------------------------------------------------ update scheduling

    def request_update(self) -> int:
        """Ask for a refresh as soon as the backoff allows; returns the version to wait past."""
        with self._cond:
            self._need_update = True
            return self._version

    def update_requested(self) -> bool:
        with self._cond:
            return self._need_update

    def time_to_next_update(self, now_ms: int) -> int:
        """Milliseconds until a refresh is due (0: now)."""
        with self._cond:
            if self._need_update or self._last_successful_refresh_ms is None:
                to_expire = 0
            else:
                to_expire = max(
                    self._last_successful_refresh_ms + self.metadata_max_age_ms - now_ms, 0
                )
            if self._last_refresh_ms is None:
                to_allow = 0
            else:
                backoff = self._backoff.backoff_ms(self._failed_attempts)
                to_allow = max(self._last_refresh_ms + backoff - now_ms, 0)
            return max(to_expire, to_allow)

    def failed_update(self, now_ms: int, error: KafkaError | None = None) -> None:
        """A refresh attempt failed (no node, disconnect, timeout); back off before the next."""
        with self._cond:
            self._last_refresh_ms = now_ms
            self._failed_attempts += 1
            if error is not None:
                self._last_error = error

    def record_error(self, error: KafkaError) -> None:
        """Remember why the cluster is unreachable (shown when a wait for metadata times out)."""
        with self._cond:
            self._last_error = error

    def fatal_error(self, error: KafkaError) -> None:
        """An error no refresh can fix (e.g. authentication): wake waiters and raise it to them."""
        with self._cond:
            self._fatal_error = error
            self._last_error = error
            self._cond.notify_all()

    def clear_fatal_error(self) -> None:
        with self._cond:
            self._fatal_error = None

    # ------------------------------------------------------------------ updates

    def update(self, response: Any, now_ms: int) -> None:
        """Apply a MetadataResponse (any version). A response without brokers is a failure."""
        top_error = int(getattr(response, "error_code", 0) or 0)
        if top_error == _REBOOTSTRAP_REQUIRED:
            log.warning("broker requested a re-bootstrap; returning to the bootstrap servers")
            self.rebootstrap(now_ms)
            return
        brokers = {
            int(b.node_id): Node(int(b.node_id), str(b.host), int(b.port), b.rack)
            for b in response.brokers
        }
        if not brokers:
            self.failed_update(now_ms, KafkaError("metadata response listed no brokers"))
            return
        with self._cond:
            old = self._cluster
            expired = {t for t, exp in self._topics.items() if exp is not None and exp <= now_ms}
            for name in expired:
                log.debug("topic %s unused for metadata.max.idle.ms; no longer tracked", name)
                del self._topics[name]
            partitions: dict[str, tuple[PartitionInfo, ...]] = {}
            topic_errors: dict[str, KafkaError] = {}
            stale = False
            for topic in response.topics:
                name = topic.name
                if name is None or name in expired:
                    continue
                error = error_for_code(int(topic.error_code))
                if error is not None:
                    topic_errors[name] = error
                    if error.invalid_metadata:
                        stale = True
                    continue
                infos, topic_stale = self._merge_partitions(name, topic.partitions, old)
                stale = stale or topic_stale
                partitions[name] = infos
            # Topics we track that this response did not mention keep their last known state
            # (a partial response must not make a topic disappear).
            for name, infos in old.partitions.items():
                if name not in partitions and name not in topic_errors and name in self._topics:
                    partitions[name] = infos
            self._cluster = Cluster(
                brokers=MappingProxyType(brokers),
                partitions=MappingProxyType(partitions),
                topic_errors=MappingProxyType(topic_errors),
                cluster_id=getattr(response, "cluster_id", None),
                controller_id=int(getattr(response, "controller_id", -1)),
                is_bootstrap=False,
            )
            self._version += 1
            self._need_update = stale
            self._last_refresh_ms = now_ms
            self._last_successful_refresh_ms = now_ms
            self._failed_attempts = 0
            self._last_error = None
            self._fatal_error = None
            self._cond.notify_all()

    def rebootstrap(self, now_ms: int) -> bool:
        """Forget the known brokers and start again from the bootstrap servers (KIP-899).

        Partitions are kept (their count matters to keyed partitioning) but their leaders no
        longer resolve until the next update. Returns False when already bootstrapping.
        """
        with self._cond:
            if self._cluster.is_bootstrap or not self._bootstrap_nodes:
                return False
            self._cluster = replace(
                self._cluster,
                brokers=MappingProxyType({n.node_id: n for n in self._bootstrap_nodes}),
                is_bootstrap=True,
            )
            self._need_update = True
            self._failed_attempts = 0
            self._last_refresh_ms = None
            log.info("re-bootstrapping metadata from %s at %s ms", self._bootstrap_nodes, now_ms)
            return True

    def _merge_partitions(
        self, topic: str, raw_partitions: Iterable[Any], old: Cluster
    ) -> tuple[tuple[PartitionInfo, ...], bool]:
        old_parts = {p.partition: p for p in old.partitions.get(topic, ())}
        merged: list[PartitionInfo] = []
        stale = False
        for raw in raw_partitions:
            index = int(raw.partition_index)
            leader_id = int(raw.leader_id)
            error_code = int(raw.error_code)
            if error_code == _LEADER_NOT_AVAILABLE:
                leader_id = -1
            info = PartitionInfo(
                topic=topic,
                partition=index,
                leader_id=leader_id,
                leader_epoch=int(getattr(raw, "leader_epoch", -1)),
                replicas=tuple(int(r) for r in raw.replica_nodes),
                isr=tuple(int(r) for r in raw.isr_nodes),
                offline_replicas=tuple(int(r) for r in getattr(raw, "offline_replicas", ())),
            )
            previous = old_parts.get(index)
            if (
                previous is not None
                and previous.leader_epoch >= 0
                and 0 <= info.leader_epoch < previous.leader_epoch
            ):
                # This broker's view is older than what we already know (e.g. a leader hint
                # arrived first): keep the newer leader and ask again later.
                log.debug(
                    "ignoring stale metadata for %s-%s (epoch %s < cached %s)",
                    topic,
                    index,
                    info.leader_epoch,
                    previous.leader_epoch,
                )
                info = previous
                stale = True
            if info.leader_id < 0:
                stale = True
            merged.append(info)
        merged.sort(key=lambda p: p.partition)
        return tuple(merged), stale

    def update_leader(
        self,
        topic: str,
        partition: int,
        leader_id: int,
        leader_epoch: int,
        node: Node | None = None,
    ) -> bool:
        """Apply a KIP-951 leader hint (Produce v10+ ``current_leader``).

        Accepted only when the epoch is newer than the cached one and the leader's endpoint is
        known (from the cluster or ``node``). Returns True when the cache changed.
        """
        if leader_id < 0 or leader_epoch < 0:
            return False
        with self._cond:
            cluster = self._cluster
            parts = cluster.partitions.get(topic)
            if parts is None:
                return False
            position = next((i for i, p in enumerate(parts) if p.partition == partition), None)
            if position is None:
                return False
            current = parts[position]
            if current.leader_epoch >= 0 and leader_epoch <= current.leader_epoch:
                return False
            brokers = dict(cluster.brokers)
            if node is not None and node.node_id == leader_id:
                brokers[leader_id] = node
            if leader_id not in brokers:
                return False
            new_parts = list(parts)
            new_parts[position] = replace(current, leader_id=leader_id, leader_epoch=leader_epoch)
            all_parts = dict(cluster.partitions)
            all_parts[topic] = tuple(new_parts)
            self._cluster = replace(
                cluster,
                brokers=MappingProxyType(brokers),
                partitions=MappingProxyType(all_parts),
            )
            self._version += 1
            self._cond.notify_all()
            return True

    # ------------------------------------------------------------------ waiting

    def await_update(self, version: int, timeout_ms: int) -> int:
        """Block until the version passes ``version``; returns the new version.

        Raises :class:`~kafka_sink.errors.KafkaTimeoutError` after ``timeout_ms`` (naming the last
        connection or refresh error), the recorded fatal error, or
        :class:`~kafka_sink.errors.ProducerClosedError` once closed.
        """
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000.0
        with self._cond:
            while True:
                if self._fatal_error is not None:
                    raise self._fatal_error
                if self._closed:
                    raise ProducerClosedError("metadata was closed while waiting for an update")
                if self._version > version:
                    return self._version
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    cause = f" (last error: {self._last_error})" if self._last_error else ""
                    raise KafkaTimeoutError(
                        f"metadata was not updated within {timeout_ms} ms{cause}"
                    )
                self._cond.wait(remaining)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        with self._cond:
            return self._closed

    def __repr__(self) -> str:
        with self._cond:
            return (
                f"Metadata(version={self._version}, brokers={sorted(self._cluster.brokers)}, "
                f"topics={sorted(self._topics)}, need_update={self._need_update})"
            )
