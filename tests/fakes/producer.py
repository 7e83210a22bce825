"""Fakes for stepping the Sender without sockets or threads.

``FakeNetworkClient`` records what the Sender sends and answers only when a test scripts it;
``FakeMetadata`` is a settable cluster view; ``make_harness`` wires both to a real accumulator,
Sender and transaction manager on a ``ManualClock`` (``Harness.run`` is one ``run_once``);
``FakeBroker`` applies Kafka's idempotent-producer append checks to produce requests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from kafka_sink.clock import ManualClock
from kafka_sink.errors import KafkaError
from kafka_sink.net.metadata import Cluster, Node, PartitionInfo
from kafka_sink.net.network_client import ClientRequest, ClientResponse
from kafka_sink.producer.accumulator import RecordAccumulator
from kafka_sink.producer.metrics import MetricConfig, ProducerMetrics
from kafka_sink.producer.sender import Sender
from kafka_sink.producer.txn.manager import TransactionManager
from kafka_sink.records.batch import read_batches
from kafka_sink.wire.messages import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)


class FakeMetadata:
    def __init__(self, partitions: dict[str, list[int]], nodes: tuple[int, ...] = (0, 1)) -> None:
        brokers = {n: Node(n, f"b{n}", 9092) for n in nodes}
        parts = {
            topic: tuple(PartitionInfo(topic, i, leader, 0) for i, leader in enumerate(leaders))
            for topic, leaders in partitions.items()
        }
        self.cluster = Cluster(
            brokers=MappingProxyType(brokers), partitions=MappingProxyType(parts)
        )
        self.update_requests = 0
        self.added: list[str] = []
        self.leader_hints: list[tuple[str, int, int, int]] = []

    def fetch(self) -> Cluster:
        return self.cluster

    def add_topic(self, topic: str, now_ms: int | None = None) -> bool:
        self.added.append(topic)
        return True

    def request_update(self) -> int:
        self.update_requests += 1
        return 0

    def time_to_next_update(self, now_ms: int) -> int:
        return 100

    def set_leader(self, topic: str, partition: int, leader: int) -> None:
        parts = list(self.cluster.partitions[topic])
        parts[partition] = replace(parts[partition], leader_id=leader)
        all_parts = dict(self.cluster.partitions)
        all_parts[topic] = tuple(parts)
        self.cluster = replace(self.cluster, partitions=MappingProxyType(all_parts))

    def update_leader(
        self, topic: str, partition: int, leader_id: int, leader_epoch: int, node: Any = None
    ) -> bool:
        self.leader_hints.append((topic, partition, leader_id, leader_epoch))
        self.set_leader(topic, partition, leader_id)
        return True


@dataclass
class Sent:
    request: ClientRequest
    now_ms: int

    @property
    def body(self) -> Any:
        return self.request.request

    def partitions(self) -> dict[tuple[str, int], bytes]:
        out = {}
        for t in self.body.topic_data:
            for p in t.partition_data:
                out[(t.name, p.index)] = bytes(p.records)
        return out

    def batches(self) -> dict[tuple[str, int], Any]:
        return {tp: read_batches(data)[0] for tp, data in self.partitions().items()}


@dataclass
class FakeNetworkClient:
    clock: ManualClock
    not_ready: set[int] = field(default_factory=set)
    sent: list[Sent] = field(default_factory=list)
    in_flight: dict[int, list[ClientRequest]] = field(default_factory=dict)
    poll_timeouts: list[int] = field(default_factory=list)
    _due: list[ClientResponse] = field(default_factory=list)
    closed: bool = False
    # Negotiated versions per api key (absent: "the highest", None) and finalized features.
    api_versions: dict[Any, int] = field(default_factory=dict)
    features: dict[str, int] = field(default_factory=dict)
    failed_nodes: set[int] = field(default_factory=set)
    # Why connecting to a node failed, as the real client reports it (node id -> error).
    connect_errors: dict[int, KafkaError] = field(default_factory=dict)

    def ready(self, node_id: int, now_ms: int) -> bool:
        return node_id not in self.not_ready

    def connection_delay(self, node_id: int, now_ms: int) -> int:
        return 50 if node_id in self.not_ready else 0

    def in_flight_count(self, node_id: int) -> int:
        return len(self.in_flight.get(node_id, []))

    def last_connect_error(self, node_id: int) -> KafkaError | None:
        return self.connect_errors.get(node_id)

    def send(self, request: ClientRequest, now_ms: int) -> None:
        self.sent.append(Sent(request, now_ms))
        if request.expect_response:
            self.in_flight.setdefault(request.node_id, []).append(request)
        else:
            self._due.append(ClientResponse(request, None, False, False, None, now_ms))

    def poll(self, timeout_ms: int, now_ms: int) -> list[ClientResponse]:
        self.poll_timeouts.append(timeout_ms)
        due, self._due = self._due, []
        for response in due:
            if response.request.callback is not None:
                response.request.callback(response)
        return due

    def least_loaded_node(self, now_ms: int) -> int | None:
        return 0

    def is_connection_failed(self, node_id: int) -> bool:
        return node_id in self.failed_nodes

    def api_version(self, node_id: int, api_key: Any) -> int | None:
        return self.api_versions.get(api_key)

    def finalized_feature_level(self, node_id: int, name: str) -> int | None:
        return self.features.get(name)

    def wakeup(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    # -- scripting ------------------------------------------------------------------------

    def _take(self, request: ClientRequest) -> None:
        self.in_flight[request.node_id].remove(request)

    def respond(self, sent: Sent, body: Any) -> None:
        self._take(sent.request)
        self._due.append(
            ClientResponse(sent.request, body, False, False, None, self.clock.now_ms())
        )

    def disconnect(self, sent: Sent) -> None:
        self._take(sent.request)
        self._due.append(ClientResponse(sent.request, None, True, False, None, self.clock.now_ms()))

    def time_out(self, sent: Sent) -> None:
        self._take(sent.request)
        self._due.append(ClientResponse(sent.request, None, False, True, None, self.clock.now_ms()))

    def produce_requests(self) -> list[Sent]:
        return [s for s in self.sent if isinstance(s.body, ProduceRequest)]

    def pending(self) -> list[Sent]:
        reqs = [r for rs in self.in_flight.values() for r in rs]
        return [s for s in self.sent if any(s.request is r for r in reqs)]


def produce_response(
    sent: Sent,
    errors: dict[tuple[str, int], int] | None = None,
    base_offsets: dict[tuple[str, int], int] | None = None,
    current_leader: tuple[int, int] | None = None,
    record_errors: dict[tuple[str, int], list[int]] | None = None,
) -> ProduceResponse:
    """``record_errors``: per partition, the batch indexes a failed partition's answer names
    (Produce v8+ record_errors, as INVALID_RECORD carries them)."""
    errors = errors or {}
    base_offsets = base_offsets or {}
    record_errors = record_errors or {}
    topics: dict[str, list[ProduceResponse.PartitionProduceResponse]] = {}
    for topic, partition in sent.partitions():
        code = errors.get((topic, partition), 0)
        leader = None
        if current_leader is not None and code:
            leader = ProduceResponse.LeaderIdAndEpoch(*current_leader)
        topics.setdefault(topic, []).append(
            ProduceResponse.PartitionProduceResponse(
                index=partition,
                error_code=code,
                base_offset=-1 if code else base_offsets.get((topic, partition), 0),
                current_leader=leader,
                record_errors=[
                    ProduceResponse.BatchIndexAndErrorMessage(i, f"record {i} is invalid")
                    for i in record_errors.get((topic, partition), [])
                ],
            )
        )
    return ProduceResponse(
        responses=[ProduceResponse.TopicProduceResponse(t, ps) for t, ps in topics.items()]
    )


@dataclass
class Harness:
    clock: ManualClock
    metadata: FakeMetadata
    network: FakeNetworkClient
    accumulator: RecordAccumulator
    sender: Sender
    tm: TransactionManager | None
    metrics: ProducerMetrics

    def send(
        self,
        topic: str = "t",
        partition: int = 0,
        value: bytes = b"v",
        key: bytes | None = None,
        callback: Callable[..., Any] | None = None,
    ) -> Any:
        return self.accumulator.append(
            topic, partition, self.clock.wall_ms(), key, value, (), callback, 0, self.clock.now_ms()
        )[0]

    def run(self, advance_ms: int = 0) -> None:
        if advance_ms:
            self.clock.advance(advance_ms)
        self.sender.run_once(self.clock.now_ms())

    def init_producer_id(self, producer_id: int = 1000, epoch: int = 0) -> None:
        self.run()
        sent = self.network.sent[-1]
        assert isinstance(sent.body, InitProducerIdRequest)
        self.network.respond(
            sent,
            InitProducerIdResponse(error_code=0, producer_id=producer_id, producer_epoch=epoch),
        )
        self.run()
        assert self.tm is not None and self.tm.producer_id == producer_id


def make_harness(
    *,
    partitions: dict[str, list[int]] | None = None,
    idempotent: bool = True,
    linger_ms: int = 5,
    batch_size: int = 16384,
    buffer_memory: int = 1 << 20,
    delivery_timeout_ms: int = 120000,
    request_timeout_ms: int = 30000,
    retries: int = 2**31 - 1,
    max_in_flight: int = 5,
    acks: int = -1,
    max_request_size: int = 1 << 20,
    metric_config: MetricConfig | None = None,
) -> Harness:
    import random

    clock = ManualClock()
    metadata = FakeMetadata(partitions or {"t": [0, 1]})
    network = FakeNetworkClient(clock)
    acc = RecordAccumulator(
        clock=clock,
        batch_size=batch_size,
        linger_ms=linger_ms,
        buffer_memory=buffer_memory,
        delivery_timeout_ms=delivery_timeout_ms,
    )
    tm = TransactionManager() if idempotent else None
    metrics = ProducerMetrics(metric_config or MetricConfig(), clock)
    acc.metrics = metrics
    sender = Sender(
        accumulator=acc,
        metadata=metadata,
        network=network,
        clock=clock,
        transaction_manager=tm,
        acks=acks,
        retries=retries,
        request_timeout_ms=request_timeout_ms,
        delivery_timeout_ms=delivery_timeout_ms,
        max_request_size=max_request_size,
        max_in_flight=max_in_flight,
        rng=random.Random(7),
        metrics=metrics,
    )
    return Harness(clock, metadata, network, acc, sender, tm, metrics)


# -- a broker model for fault injection ---------------------------------------------------------

DUPLICATE_WINDOW = 5  # the broker keeps the metadata of the last 5 batches per producer/partition


@dataclass
class _ProducerStateEntry:
    epoch: int
    last_sequence: int
    recent: list[tuple[int, int, int]] = field(default_factory=list)  # (first, last, offset)


@dataclass
class Receipt:
    """One batch as it reached the broker (whether or not it was appended)."""

    tp: tuple[str, int]
    producer_id: int
    producer_epoch: int
    base_sequence: int
    values: list[bytes | None]
    appended: bool = False


@dataclass
class FakeBroker:
    """Kafka's idempotent-producer checks (2.5+ broker) for every partition of one fake cluster.

    ``handle(sent)`` runs the append checks for each batch of a produce request and returns the
    ProduceResponse a broker would send; what was appended is in ``logs`` (value, producer id,
    epoch, sequence per offset), every batch received in ``receipts``. ``reject`` forces an
    error code for a partition's next batches (the batch is then not appended); ``max_records``
    makes batches with more records fail with MESSAGE_TOO_LARGE; a batch holding one of
    ``invalid_values`` fails with INVALID_RECORD naming those records in record_errors (the
    broker validates records before it checks sequences, so such a batch takes none).
    """

    logs: dict[tuple[str, int], list[tuple[bytes | None, int, int, int]]] = field(
        default_factory=dict
    )
    receipts: list[Receipt] = field(default_factory=list)
    states: dict[tuple[tuple[str, int], int], _ProducerStateEntry] = field(default_factory=dict)
    reject: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    max_records: int | None = None
    invalid_values: set[bytes] = field(default_factory=set)

    def handle(self, sent: Sent) -> ProduceResponse:
        errors: dict[tuple[str, int], int] = {}
        offsets: dict[tuple[str, int], int] = {}
        named: dict[tuple[str, int], list[int]] = {}
        for tp, batch in sent.batches().items():
            code, offset = self._append(tp, batch)
            errors[tp] = code
            offsets[tp] = offset
            if code == 87:
                named[tp] = [
                    i for i, r in enumerate(batch.records) if r.value in self.invalid_values
                ]
        return produce_response(sent, errors=errors, base_offsets=offsets, record_errors=named)

    def _append(self, tp: tuple[str, int], batch: Any) -> tuple[int, int]:
        values = [r.value for r in batch.records]
        receipt = Receipt(tp, batch.producer_id, batch.producer_epoch, batch.base_sequence, values)
        self.receipts.append(receipt)
        forced = self.reject.get(tp)
        if forced:
            return forced.pop(0), -1
        if self.max_records is not None and len(values) > self.max_records:
            return 10, -1  # MESSAGE_TOO_LARGE
        if any(v in self.invalid_values for v in values):
            return 87, -1  # INVALID_RECORD
        first = batch.base_sequence
        last = first + len(values) - 1
        key = (tp, batch.producer_id)
        state = self.states.get(key)
        if batch.producer_id < 0:  # not idempotent: no checks, no state
            log = self.logs.setdefault(tp, [])
            offset = len(log)
            log.extend((value, -1, -1, -1) for value in values)
            receipt.appended = True
            return 0, offset
        if state is not None:
            if batch.producer_epoch < state.epoch:
                return 47, -1  # INVALID_PRODUCER_EPOCH
            if batch.producer_epoch == state.epoch:
                for f, lst, offset in state.recent:
                    if (f, lst) == (first, last):
                        return 0, offset  # a duplicate: success with the original offset
                if first != state.last_sequence + 1:
                    return 45, -1  # OUT_OF_ORDER_SEQUENCE_NUMBER
            elif first != 0:
                return 45, -1  # a new epoch starts at sequence 0
        log = self.logs.setdefault(tp, [])
        offset = len(log)
        for i, value in enumerate(values):
            log.append((value, batch.producer_id, batch.producer_epoch, first + i))
        if state is None or state.epoch != batch.producer_epoch:
            state = self.states[key] = _ProducerStateEntry(batch.producer_epoch, last)
        state.last_sequence = last
        state.recent = [*state.recent, (first, last, offset)][-DUPLICATE_WINDOW:]
        receipt.appended = True
        return 0, offset

    def forget_producers(self) -> None:
        """Lose every producer state (as after retention removed it)."""
        self.states.clear()
