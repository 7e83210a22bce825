"""A minimal, blocking Kafka Metadata probe for the test harness.

The harness must tell when a broker really serves requests (not only when its port accepts a
connection) and whether a freshly created topic has a leader on every broker. It does so with one
hand-encoded Metadata v4 request over a plain socket, written independently of
``kafka_sink.wire`` so that a bug there cannot make the harness lie about the broker.

Invariants: one connection per call, closed before returning; v4 is the oldest Metadata version
Kafka 4.x still serves (KIP-896 removed v0-v3) and the newest that is not "flexible", so no tagged
fields are involved; every failure surfaces as ``OSError`` (connection problems) or ``ValueError``
(a malformed answer).
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field

_METADATA_API_KEY = 3
_METADATA_VERSION = 4
_CLIENT_ID = b"kafka-sink-probe"
_MAX_RESPONSE_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class PartitionState:
    """One partition as a broker sees it; ``leader_id`` is -1 while there is no leader."""

    partition_index: int
    error_code: int
    leader_id: int
    replica_nodes: tuple[int, ...]
    isr_nodes: tuple[int, ...]


@dataclass(frozen=True)
class TopicState:
    name: str
    error_code: int
    partitions: dict[int, PartitionState] = field(default_factory=dict)


@dataclass(frozen=True)
class ClusterView:
    """What one broker reports: live (unfenced) brokers, the controller and requested topics."""

    brokers: dict[int, tuple[str, int]]
    controller_id: int
    cluster_id: str | None
    topics: dict[str, TopicState]


class _Cursor:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def _take(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        if self._pos + size > len(self._data):
            raise ValueError("truncated Metadata response")
        (value,) = struct.unpack_from(fmt, self._data, self._pos)
        self._pos += size
        return int(value)

    def int8(self) -> int:
        return self._take(">b")

    def int16(self) -> int:
        return self._take(">h")

    def int32(self) -> int:
        return self._take(">i")

    def string(self) -> str | None:
        length = self.int16()
        if length < 0:
            return None
        if self._pos + length > len(self._data):
            raise ValueError("truncated Metadata response")
        text = self._data[self._pos : self._pos + length].decode("utf-8")
        self._pos += length
        return text

    def int32_array(self) -> tuple[int, ...]:
        count = self.int32()
        return tuple(self.int32() for _ in range(max(count, 0)))


def _encode_string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack(">h", len(raw)) + raw


def _request(correlation_id: int, topics: list[str] | None) -> bytes:
    header = struct.pack(
        ">hhih", _METADATA_API_KEY, _METADATA_VERSION, correlation_id, len(_CLIENT_ID)
    )
    header += _CLIENT_ID
    if topics is None:
        body = struct.pack(">i", -1)  # null array: every topic
    else:
        body = struct.pack(">i", len(topics)) + b"".join(_encode_string(t) for t in topics)
    body += struct.pack(">b", 0)  # allow_auto_topic_creation=false: probing must not create
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("broker closed the connection during the Metadata probe")
        chunks += chunk
    return bytes(chunks)


def _decode(data: bytes, correlation_id: int) -> ClusterView:
    cur = _Cursor(data)
    if cur.int32() != correlation_id:
        raise ValueError("Metadata response with an unexpected correlation id")
    cur.int32()  # throttle_time_ms
    brokers: dict[int, tuple[str, int]] = {}
    for _ in range(max(cur.int32(), 0)):
        node_id = cur.int32()
        host = cur.string() or ""
        port = cur.int32()
        cur.string()  # rack
        brokers[node_id] = (host, port)
    cluster_id = cur.string()
    controller_id = cur.int32()
    topics: dict[str, TopicState] = {}
    for _ in range(max(cur.int32(), 0)):
        error_code = cur.int16()
        name = cur.string() or ""
        cur.int8()  # is_internal
        partitions: dict[int, PartitionState] = {}
        for _ in range(max(cur.int32(), 0)):
            p_error = cur.int16()
            index = cur.int32()
            leader = cur.int32()
            replicas = cur.int32_array()
            isr = cur.int32_array()
            partitions[index] = PartitionState(index, p_error, leader, replicas, isr)
        topics[name] = TopicState(name, error_code, partitions)
    return ClusterView(brokers, controller_id, cluster_id, topics)


def fetch_metadata(
    host: str, port: int, topics: list[str] | None = None, *, timeout_s: float = 2.0
) -> ClusterView:
    """Ask the broker at ``host:port`` for cluster metadata (all topics when ``topics`` is None)."""
    correlation_id = 1
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(_request(correlation_id, topics))
        (size,) = struct.unpack(">i", _recv_exactly(sock, 4))
        if not 4 <= size <= _MAX_RESPONSE_BYTES:
            raise ValueError(f"implausible Metadata response size {size}")
        return _decode(_recv_exactly(sock, size), correlation_id)


def parse_bootstrap(bootstrap_servers: str) -> list[tuple[str, int]]:
    """``"h1:p1,h2:p2"`` -> ``[("h1", p1), ("h2", p2)]``."""
    out: list[tuple[str, int]] = []
    for raw in bootstrap_servers.split(","):
        item = raw.strip()
        if not item:
            continue
        host, _, port = item.rpartition(":")
        out.append((host.strip("[]") or "127.0.0.1", int(port)))
    if not out:
        raise ValueError(f"no host:port in bootstrap servers {bootstrap_servers!r}")
    return out
