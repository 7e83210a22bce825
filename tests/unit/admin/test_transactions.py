"""complete_transaction / list_transactions / abort_transactions against a scripted coordinator.

The fake network client answers each request at once from a script (or never, or by dropping
the connection) and a poll with nothing to deliver advances the manual clock by its timeout, so
backoff and deadlines run in simulated time.
"""

from __future__ import annotations

import itertools
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from kafka_sink.admin.client import AdminClient, AdminConfig
from kafka_sink.admin.transactions import (
    Completion,
    abort_transactions,
    complete_transaction,
    complete_transactions,
    describe_transactions,
    list_transactions,
)
from kafka_sink.clock import ManualClock
from kafka_sink.errors import (
    ConcurrentTransactionsError,
    InvalidTxnStateError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
    TransactionLostError,
)
from kafka_sink.net.network_client import ClientRequest, ClientResponse
from kafka_sink.prepared import PreparedTransaction
from kafka_sink.wire.api import ApiKey
from kafka_sink.wire.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    EndTxnRequest,
    EndTxnResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from tests.fakes.producer import FakeMetadata, FakeNetworkClient, Sent

CONFIG = {"bootstrap.servers": "b0:9092", "retry.backoff.ms": "100"}
PREPARED = PreparedTransaction("sink-q-1", 4000, 7, [("t", 0), ("t", 1)])

NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
CONCURRENT_TRANSACTIONS = 51
PRODUCER_FENCED = 90
TRANSACTIONAL_ID_NOT_FOUND = 105

DROP = object()  # the connection is lost instead of an answer
SILENT = object()  # no answer at all


class _Metadata(FakeMetadata):
    def last_error(self) -> None:
        return None

    def close(self) -> None:
        pass


@dataclass
class ScriptedCluster(FakeNetworkClient):
    """Brokers 0 and 1; by default node 1 coordinates every transactional id."""

    coordinator: list[int] = field(default_factory=lambda: [1])
    transaction_version: int = 2
    end_txn_max: int = 5
    list_max: int = 2
    find_max: int = 4
    end_txn: list[Any] = field(default_factory=list)  # codes / DROP / SILENT, in order
    # node -> the transactions its coordinator owns: (id, pid, epoch, state)
    owned: dict[int, list[tuple[str, int, int, str]]] = field(default_factory=dict)
    on_end_txn: Callable[[EndTxnRequest], None] | None = None
    metadata: Any = None  # the admin client's metadata, set by the fixture
    # Per-id coordinators (FindCoordinator v4+ answers every key); else ``coordinator``.
    coordinator_of: dict[str, int] = field(default_factory=dict)
    polls: int = 0
    # Like max.in.flight.requests.per.connection: a node is not ready with this many unanswered.
    max_in_flight: int | None = None

    def ready(self, node_id: int, now_ms: int) -> bool:
        unanswered = sum(1 for r in self._due if r.request.node_id == node_id)
        full = self.max_in_flight is not None and unanswered >= self.max_in_flight
        return super().ready(node_id, now_ms) and not full

    def send(self, request: ClientRequest, now_ms: int) -> None:
        if not self.ready(request.node_id, now_ms):
            raise AssertionError(f"request sent to node {request.node_id}, which is not ready")
        self._send(request, now_ms)

    def is_connection_failed(self, node_id: int) -> bool:
        return False

    def api_version(self, node_id: int, api_key: ApiKey) -> int | None:
        return {
            ApiKey.FIND_COORDINATOR: self.find_max,
            ApiKey.END_TXN: self.end_txn_max,
            ApiKey.LIST_TRANSACTIONS: self.list_max,
            ApiKey.DESCRIBE_TRANSACTIONS: 0,
            ApiKey.API_VERSIONS: 3,
        }.get(api_key)

    def _send(self, request: ClientRequest, now_ms: int) -> None:
        if request.version is None:
            request.api_version = self.api_version(request.node_id, request.api_key) or 0
        else:
            request.api_version = request.version
        super().send(request, now_ms)
        sent = self.sent[-1]
        answer = self._answer(sent)
        if answer is DROP:
            self.disconnect(sent)
        elif answer is not SILENT:
            self.respond(sent, answer)

    def poll(self, timeout_ms: int, now_ms: int) -> list[ClientResponse]:
        self.polls += 1
        if not self._due:
            self.clock.advance(max(timeout_ms, 1))
        return super().poll(timeout_ms, now_ms)

    def requests(self, kind: type) -> list[Sent]:
        return [s for s in self.sent if isinstance(s.body, kind)]

    def _answer(self, sent: Sent) -> Any:
        body = sent.body
        if isinstance(body, FindCoordinatorRequest):
            node = self.coordinator.pop(0) if len(self.coordinator) > 1 else self.coordinator[0]
            if sent.request.api_version < 4:
                assert body.key_type == 1
                return FindCoordinatorResponse(
                    error_code=0, node_id=node, host=f"b{node}", port=9092, coordinators=[]
                )
            entries = []
            for key in body.coordinator_keys:
                at = self.coordinator_of.get(key, node)
                entry = FindCoordinatorResponse.Coordinator(
                    key=key, node_id=at, host=f"b{at}", port=9092, error_code=0
                )
                if at < 0:
                    entry.error_code, entry.node_id = -at, -1
                entries.append(entry)
            return FindCoordinatorResponse(coordinators=entries)
        if isinstance(body, ApiVersionsRequest):
            feature = ApiVersionsResponse.FinalizedFeatureKey(
                "transaction.version", self.transaction_version, self.transaction_version
            )
            return ApiVersionsResponse(error_code=0, api_keys=[], finalized_features=[feature])
        if isinstance(body, EndTxnRequest):
            if self.on_end_txn is not None:
                self.on_end_txn(body)
            answer = self.end_txn.pop(0) if self.end_txn else NONE
            if not isinstance(answer, int):
                return answer
            bumped = sent.request.api_version >= 5 and answer == NONE
            return EndTxnResponse(
                error_code=answer,
                producer_id=body.producer_id if bumped else -1,
                producer_epoch=body.producer_epoch + 1 if bumped else -1,
            )
        if isinstance(body, ListTransactionsRequest):
            states = [
                ListTransactionsResponse.TransactionState(tid, pid, state)
                for tid, pid, _epoch, state in self.owned.get(sent.request.node_id, [])
            ]
            return ListTransactionsResponse(error_code=0, transaction_states=states)
        if isinstance(body, DescribeTransactionsRequest):
            known = {t[0]: t for t in self.owned.get(sent.request.node_id, [])}
            out = []
            for tid in body.transactional_ids:
                if tid in known:
                    _, pid, epoch, state = known[tid]
                    topics = [DescribeTransactionsResponse.TopicData("t", [1, 0])]
                    out.append(
                        DescribeTransactionsResponse.TransactionState(
                            0,
                            tid,
                            state,
                            60000,
                            1,
                            pid,
                            epoch,
                            topics if state == "Ongoing" else [],
                        )
                    )
                else:
                    out.append(
                        DescribeTransactionsResponse.TransactionState(
                            TRANSACTIONAL_ID_NOT_FOUND, tid, "", 0, -1, -1, -1, []
                        )
                    )
            return DescribeTransactionsResponse(transaction_states=out)
        raise AssertionError(f"unexpected request {body!r}")


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> ScriptedCluster:
    """The scripted cluster every call of this module's functions talks to."""
    return install_scripted_cluster(monkeypatch)


def install_scripted_cluster(monkeypatch: pytest.MonkeyPatch) -> ScriptedCluster:
    """A scripted cluster that every admin client built from a config talks to."""
    scripted = ScriptedCluster(ManualClock())
    scripted.metadata = _Metadata({}, nodes=(0, 1))

    def from_config(
        config: Mapping[str, object], clock: object = None
    ) -> tuple[AdminClient, AdminConfig]:
        cfg = AdminConfig.from_mapping(config)
        client = AdminClient(
            scripted,
            scripted.metadata,
            scripted.clock,
            request_timeout_ms=cfg.request_timeout_ms,
            retry_backoff_ms=cfg.retry_backoff_ms,
            retry_backoff_max_ms=cfg.retry_backoff_max_ms,
        )
        return client, cfg

    monkeypatch.setattr(AdminClient, "from_config", staticmethod(from_config))
    return scripted


def _complete(cluster: ScriptedCluster, commit: bool = True, timeout: float | None = None) -> Any:
    return complete_transaction(CONFIG, PREPARED, commit=commit, timeout=timeout)


def _end_txns(cluster: ScriptedCluster) -> list[tuple[int, EndTxnRequest, int]]:
    return [
        (s.request.node_id, s.body, s.request.api_version) for s in cluster.requests(EndTxnRequest)
    ]


# -- complete_transaction: each answer of the coordinator ---------------------------------------


def test_commit_answered_none_sends_end_txn_v5_to_the_coordinator_and_returns_the_new_epoch(
    cluster: ScriptedCluster,
) -> None:
    assert _complete(cluster) == (4000, 8)
    (find,) = cluster.requests(FindCoordinatorRequest)
    assert (find.body.key_type, find.body.coordinator_keys) == (1, ["sink-q-1"])
    ((node, body, version),) = _end_txns(cluster)
    assert (node, version) == (1, 5)
    assert (body.transactional_id, body.producer_id, body.producer_epoch, body.committed) == (
        "sink-q-1",
        4000,
        7,
        True,
    )
    assert cluster.closed


def test_find_coordinator_below_v4_sends_the_key_alone(cluster: ScriptedCluster) -> None:
    cluster.find_max = 3
    cluster.coordinator = [0]
    assert _complete(cluster) == (4000, 8)
    (find,) = cluster.requests(FindCoordinatorRequest)
    assert (find.request.api_version, find.body.key, find.body.key_type) == (3, "sink-q-1", 1)
    assert [n for n, _, _ in _end_txns(cluster)] == [0]


def test_transactions_v1_caps_end_txn_at_v4_and_returns_none(cluster: ScriptedCluster) -> None:
    cluster.transaction_version = 1
    assert _complete(cluster, commit=False) is None
    ((_, body, version),) = _end_txns(cluster)
    assert (version, body.committed) == (4, False)


def test_a_repeated_commit_answered_none_succeeds_again(cluster: ScriptedCluster) -> None:
    assert _complete(cluster) == (4000, 8)
    assert _complete(cluster) == (4000, 8)
    assert len(_end_txns(cluster)) == 2


def test_concurrent_transactions_is_retried_after_backoff_until_none(
    cluster: ScriptedCluster,
) -> None:
    cluster.end_txn = [CONCURRENT_TRANSACTIONS, CONCURRENT_TRANSACTIONS, NONE]
    assert _complete(cluster) == (4000, 8)
    sent = cluster.requests(EndTxnRequest)
    assert len(sent) == 3
    assert all(n == 1 for n, _, _ in _end_txns(cluster))
    # Backoff between the attempts (retry.backoff.ms=100, doubling, +-20 %).
    gaps = [b.now_ms - a.now_ms for a, b in itertools.pairwise(sent)]
    assert gaps[0] >= 80 and gaps[1] >= 160
    assert len(cluster.requests(FindCoordinatorRequest)) == 1


def test_not_coordinator_finds_the_coordinator_again(cluster: ScriptedCluster) -> None:
    cluster.coordinator = [1, 0]
    cluster.end_txn = [NOT_COORDINATOR, NONE]
    assert _complete(cluster) == (4000, 8)
    assert [n for n, _, _ in _end_txns(cluster)] == [1, 0]
    assert len(cluster.requests(FindCoordinatorRequest)) == 2


def test_coordinator_loading_and_a_lost_connection_are_retried(cluster: ScriptedCluster) -> None:
    cluster.coordinator = [-COORDINATOR_NOT_AVAILABLE, 1]
    cluster.end_txn = [COORDINATOR_LOAD_IN_PROGRESS, DROP, NONE]
    assert _complete(cluster) == (4000, 8)
    assert len(_end_txns(cluster)) == 3
    # Not available at first, then found; found again after the lost connection.
    assert len(cluster.requests(FindCoordinatorRequest)) == 3


def test_a_lost_answer_then_none_on_the_retry_is_success(cluster: ScriptedCluster) -> None:
    # The first EndTxn committed but its answer was lost; the retry finds it complete.
    cluster.end_txn = [DROP, NONE]
    assert _complete(cluster, commit=True) == (4000, 8)


@pytest.mark.parametrize(
    ("code", "why"),
    [
        (INVALID_TXN_STATE, "transaction.timeout.ms"),
        (PRODUCER_FENCED, "another producer initialised it"),
        (INVALID_PRODUCER_EPOCH, "another producer initialised it"),
        (INVALID_PRODUCER_ID_MAPPING, "does not know this transactional id"),
    ],
)
def test_a_commit_the_coordinator_refuses_is_a_lost_transaction(
    cluster: ScriptedCluster, code: int, why: str
) -> None:
    cluster.end_txn = [code]
    cluster.owned = {1: [("sink-q-1", 4000, 8, "CompleteAbort")]}
    with pytest.raises(TransactionLostError) as caught:
        _complete(cluster)
    text = str(caught.value)
    assert "'sink-q-1' (producer id 4000, epoch 7) cannot be committed" in text
    assert "the data it wrote is lost" in text and why in text
    assert "the coordinator now shows state CompleteAbort, producer id 4000, epoch 8" in text
    assert getattr(caught.value.__cause__, "code", None) == code
    assert len(_end_txns(cluster)) == 1  # not retried


def test_a_lost_transaction_whose_id_the_coordinator_forgot_says_so(
    cluster: ScriptedCluster,
) -> None:
    cluster.end_txn = [INVALID_PRODUCER_ID_MAPPING]
    with pytest.raises(TransactionLostError, match="does not know the transactional id"):
        _complete(cluster)


def test_aborting_an_already_aborted_transaction_succeeds(cluster: ScriptedCluster) -> None:
    # The coordinator aborted it on timeout and bumped the epoch: our epoch is fenced.
    cluster.end_txn = [PRODUCER_FENCED]
    cluster.owned = {1: [("sink-q-1", 4000, 8, "CompleteAbort")]}
    assert _complete(cluster, commit=False) is None


def test_aborting_a_committed_transaction_is_an_error(cluster: ScriptedCluster) -> None:
    cluster.end_txn = [INVALID_TXN_STATE]
    cluster.owned = {1: [("sink-q-1", 4000, 8, "CompleteCommit")]}
    with pytest.raises(InvalidTxnStateError, match="it was committed") as caught:
        _complete(cluster, commit=False)
    assert isinstance(caught.value.__cause__, InvalidTxnStateError)


def test_aborting_a_transaction_a_newer_producer_took_cannot_be_confirmed(
    cluster: ScriptedCluster,
) -> None:
    cluster.end_txn = [PRODUCER_FENCED]
    cluster.owned = {1: [("sink-q-1", 4000, 12, "Ongoing")]}
    with pytest.raises(InvalidTxnStateError, match="cannot confirm the abort") as caught:
        _complete(cluster, commit=False)
    assert isinstance(caught.value.__cause__, ProducerFencedError)


# -- a prepared transaction that wrote nothing ---------------------------------------------------

EMPTY = PreparedTransaction("sink-q-1", 4000, 7)


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
@pytest.mark.parametrize(
    "shown",
    [
        [("sink-q-1", 4000, 7, "Empty")],  # prepared right after init_transactions()
        [("sink-q-1", 4000, 7, "CompleteCommit")],  # after a transaction that committed
        [("sink-q-1", 4000, 8, "Ongoing")],  # re-initialised since, by another producer
        [],  # the id expired
    ],
    ids=["empty", "after-a-commit", "taken-over", "unknown"],
)
def test_a_transaction_that_wrote_nothing_is_done_without_end_txn(
    cluster: ScriptedCluster, commit: bool, shown: list[tuple[str, int, int, str]]
) -> None:
    # What a coordinator answers an EndTxn for a transaction it never started.
    cluster.end_txn = [INVALID_TXN_STATE]
    cluster.owned = {1: shown}
    assert complete_transaction(CONFIG, EMPTY, commit=commit) is None
    assert _end_txns(cluster) == []
    (described,) = cluster.requests(DescribeTransactionsRequest)
    assert (described.request.node_id, described.body.transactional_ids) == (1, ["sink-q-1"])


def test_a_handle_without_partitions_for_an_open_transaction_ends_it(
    cluster: ScriptedCluster,
) -> None:
    # Built by hand without its partitions: the coordinator shows it open at that epoch.
    cluster.owned = {1: [("sink-q-1", 4000, 7, "Ongoing")]}
    assert complete_transaction(CONFIG, EMPTY, commit=True) == (4000, 8)
    ((_, body, version),) = _end_txns(cluster)
    assert (body.producer_id, body.producer_epoch, body.committed, version) == (4000, 7, True, 5)


def test_the_timeout_names_what_it_waited_for_and_the_last_error(
    cluster: ScriptedCluster,
) -> None:
    cluster.end_txn = [CONCURRENT_TRANSACTIONS] * 1000
    start = cluster.clock.now_ms()
    with pytest.raises(KafkaTimeoutError) as caught:
        _complete(cluster, timeout=5)
    assert cluster.clock.now_ms() - start <= 5000 + 1000
    text = str(caught.value)
    assert "complete_transaction(commit) of 'sink-q-1' (producer id 4000, epoch 7)" in text
    assert "did not finish within 5000 ms" in text
    assert "the coordinator (node 1) to commit transaction 'sink-q-1'" in text
    assert "CONCURRENT_TRANSACTIONS" in text
    assert isinstance(caught.value, KafkaError) and not isinstance(
        caught.value, ConcurrentTransactionsError
    )


def test_a_coordinator_that_never_answers_times_out_by_max_block_ms(
    cluster: ScriptedCluster,
) -> None:
    cluster.end_txn = [SILENT] * 1000
    config = {**CONFIG, "max.block.ms": "3000"}
    start = cluster.clock.now_ms()
    with pytest.raises(
        KafkaTimeoutError, match="within 3000 ms: still waiting for the coordinator"
    ):
        complete_transaction(config, PREPARED)
    assert cluster.clock.now_ms() - start <= 3000 + 1000


def test_bad_arguments_are_refused_before_any_request(cluster: ScriptedCluster) -> None:
    with pytest.raises(TypeError, match="PreparedTransaction"):
        complete_transaction(CONFIG, ("sink-q-1", 4000, 7))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty transactional-id prefix"):
        abort_transactions(CONFIG, "")
    assert cluster.sent == []


def test_a_secret_in_the_config_never_reaches_the_error_text(cluster: ScriptedCluster) -> None:
    config = {
        **CONFIG,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="u" password="hunter2-secret";',
        "max.block.ms": "1000",
    }
    cluster.end_txn = [SILENT] * 10
    with pytest.raises(KafkaTimeoutError) as caught:
        complete_transaction(config, PREPARED)
    assert "hunter2" not in str(caught.value)


# -- listing and aborting by prefix --------------------------------------------------------------


def test_list_asks_every_broker_with_an_anchored_escaped_pattern(cluster: ScriptedCluster) -> None:
    cluster.owned = {
        0: [("job.a+1", 10, 0, "Ongoing"), ("other-1", 11, 0, "Ongoing")],
        1: [("job.a+2", 12, 3, "CompleteCommit")],
    }
    found = list_transactions(CONFIG, "job.a+")
    assert [
        (t.transactional_id, t.producer_id, t.producer_epoch, t.state, t.coordinator_id)
        for t in found
    ] == [
        ("job.a+1", 10, 0, "Ongoing", 0),
        ("job.a+2", 12, 3, "CompleteCommit", 1),
    ]
    assert found[0].partitions == (("t", 0), ("t", 1))
    listed = cluster.requests(ListTransactionsRequest)
    assert sorted(s.request.node_id for s in listed) == [0, 1]
    assert {s.body.transactional_id_pattern for s in listed} == {r"^job\.a\+.*"}
    described = cluster.requests(DescribeTransactionsRequest)
    assert {(s.request.node_id, tuple(s.body.transactional_ids)) for s in described} == {
        (0, ("job.a+1",)),
        (1, ("job.a+2",)),
    }


def test_list_without_the_pattern_filter_filters_itself(cluster: ScriptedCluster) -> None:
    cluster.list_max = 1
    cluster.owned = {0: [("job-1", 10, 0, "Ongoing"), ("xjob-1", 11, 0, "Ongoing")]}
    found = list_transactions(CONFIG, "job-")
    assert [t.transactional_id for t in found] == ["job-1"]
    assert {s.body.transactional_id_pattern for s in cluster.requests(ListTransactionsRequest)} == {
        None
    }


def test_list_skips_a_broker_that_left_the_cluster_and_asks_the_new_coordinators(
    cluster: ScriptedCluster,
) -> None:
    # Node 1 dies: its ListTransactions calls lose their connection until the controller fences
    # it, which drops it from the metadata and moves its coordinators (here: to node 0). The
    # listing must not wait for the dead node until the deadline; it lists the live ones again.
    cluster.owned = {0: [("job-1", 10, 0, "Ongoing")], 1: [("job-2", 12, 3, "Ongoing")]}
    original = cluster._answer
    metadata = cluster.metadata
    updates = 0

    def answer(sent: Sent) -> Any:
        if isinstance(sent.body, ListTransactionsRequest) and sent.request.node_id == 1:
            return DROP
        return original(sent)

    def request_update() -> int:
        nonlocal updates
        updates += 1
        if updates == 2:  # fenced: node 1 leaves, node 0 now coordinates its ids
            metadata.cluster = _Metadata({}, nodes=(0,)).cluster
            cluster.owned = {0: [("job-1", 10, 0, "Ongoing"), ("job-2", 12, 3, "Ongoing")]}
        return 0

    cluster._answer = answer  # type: ignore[method-assign]
    metadata.request_update = request_update
    found = list_transactions(CONFIG, "job-", timeout=30)
    assert [(t.transactional_id, t.coordinator_id) for t in found] == [("job-1", 0), ("job-2", 0)]


def test_list_keeps_trying_a_broker_still_in_the_cluster_until_the_deadline(
    cluster: ScriptedCluster,
) -> None:
    # A broker that stays in the metadata may coordinate ids: skipping it would hide them.
    cluster.owned = {0: [("job-1", 10, 0, "Ongoing")], 1: [("job-2", 12, 3, "Ongoing")]}
    original = cluster._answer

    def answer(sent: Sent) -> Any:
        if isinstance(sent.body, ListTransactionsRequest) and sent.request.node_id == 1:
            return DROP
        return original(sent)

    cluster._answer = answer  # type: ignore[method-assign]
    with pytest.raises(KafkaTimeoutError) as caught:
        list_transactions(CONFIG, "job-", timeout=5)
    assert "the list of transactions of node 1" in str(caught.value)


def test_abort_transactions_aborts_only_the_open_ones_with_their_epoch(
    cluster: ScriptedCluster,
) -> None:
    cluster.coordinator = [0]
    cluster.owned = {
        0: [
            ("job-1", 10, 4, "Ongoing"),
            ("job-2", 11, 0, "CompleteCommit"),
            ("job-3", 12, 2, "CompleteAbort"),
        ]
    }
    aborted = abort_transactions(CONFIG, "job-")
    assert [t.transactional_id for t in aborted] == ["job-1"]
    ((node, body, _),) = _end_txns(cluster)
    assert (node, body.transactional_id, body.producer_id, body.producer_epoch, body.committed) == (
        0,
        "job-1",
        10,
        4,
        False,
    )


def test_abort_transactions_waits_for_a_transaction_being_ended(cluster: ScriptedCluster) -> None:
    cluster.coordinator = [0]
    cluster.owned = {0: [("job-1", 10, 4, "PrepareCommit")]}
    describes = 0
    original = cluster._answer

    def answer(sent: Sent) -> Any:
        nonlocal describes
        if isinstance(sent.body, DescribeTransactionsRequest):
            describes += 1
            if describes == 3:
                cluster.owned = {0: [("job-1", 10, 5, "CompleteCommit")]}
        return original(sent)

    cluster._answer = answer  # type: ignore[method-assign]
    assert abort_transactions(CONFIG, "job-") == []
    assert _end_txns(cluster) == []
    assert describes == 3


def test_abort_transactions_returns_once_the_abort_is_complete(cluster: ScriptedCluster) -> None:
    # EndTxn is answered at PrepareAbort; the markers are written after. Returning then would
    # leave read_committed readers held back by a transaction the caller believes gone.
    cluster.coordinator = [0]
    cluster.owned = {0: [("job-1", 10, 4, "Ongoing")]}
    original = cluster._answer
    describes_after_abort = 0

    def answer(sent: Sent) -> Any:
        nonlocal describes_after_abort
        if isinstance(sent.body, EndTxnRequest):
            cluster.owned = {0: [("job-1", 10, 5, "PrepareAbort")]}
        elif isinstance(sent.body, DescribeTransactionsRequest) and _end_txns(cluster):
            describes_after_abort += 1
            if describes_after_abort == 2:
                cluster.owned = {0: [("job-1", 10, 5, "CompleteAbort")]}
        return original(sent)

    cluster._answer = answer  # type: ignore[method-assign]
    assert [t.transactional_id for t in abort_transactions(CONFIG, "job-")] == ["job-1"]
    assert describes_after_abort == 2


def test_abort_transactions_reports_what_it_could_not_abort(cluster: ScriptedCluster) -> None:
    cluster.coordinator = [0]
    cluster.owned = {0: [("job-1", 10, 4, "Ongoing"), ("job-2", 11, 0, "Ongoing")]}
    cluster.end_txn = [NONE, 53]  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED for job-2
    with pytest.raises(KafkaError) as caught:
        abort_transactions(CONFIG, "job-")
    text = str(caught.value)
    assert "could not abort 1 transaction(s) (aborted 1)" in text
    assert "'job-2': TRANSACTIONAL_ID_AUTHORIZATION_FAILED" in text


# -- the real network client -------------------------------------------------------------------


def test_an_unreachable_cluster_times_out_naming_the_metadata_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Real sockets on a manual clock: each poll looks at the sockets briefly (a refused
    # connection on the loopback is reported at once), then lets the whole poll timeout pass.
    clock = ManualClock()
    on_system_clock = AdminClient.from_config

    def on_manual_clock(
        config: Mapping[str, object], _clock: object = None
    ) -> tuple[AdminClient, AdminConfig]:
        client, cfg = on_system_clock(config, clock)
        real_poll = client.network.poll

        def poll(timeout_ms: int, now_ms: int) -> Any:
            responses = real_poll(min(timeout_ms, 10), now_ms)
            clock.advance(timeout_ms)
            return responses

        client.network.poll = poll
        return client, cfg

    monkeypatch.setattr(AdminClient, "from_config", staticmethod(on_manual_clock))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again below: connections are refused
    config = {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="u" password="hunter2-secret";',
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
    }
    start = time.monotonic()
    with pytest.raises(KafkaTimeoutError) as caught:
        list_transactions(config, "job-", timeout=1.5)
    assert time.monotonic() - start < 10
    text = str(caught.value)
    assert "list_transactions('job-') did not finish within 1500 ms" in text
    assert "still waiting for the cluster metadata (the broker list)" in text
    assert f"127.0.0.1:{port}" in text  # the last connection error
    assert "hunter2" not in text


# -- complete_transactions: many at once, one client ---------------------------------------------

HANDLES = [
    PreparedTransaction("sink-q-0-0", 100, 1, [("t", 0)]),
    PreparedTransaction("sink-q-1-0", 101, 1, [("t", 1)]),
    PreparedTransaction("sink-q-2-0", 102, 1, [("t", 2)]),
]


def test_complete_transactions_looks_up_once_and_sends_every_end_txn_before_awaiting_any(
    cluster: ScriptedCluster,
) -> None:
    cluster.coordinator_of = {"sink-q-0-0": 0, "sink-q-1-0": 1, "sink-q-2-0": 1}
    polls_at_send: list[int] = []
    cluster.on_end_txn = lambda body: polls_at_send.append(cluster.polls)
    results = complete_transactions(CONFIG, HANDLES)
    assert results == [Completion(h, (h.producer_id, h.producer_epoch + 1)) for h in HANDLES]
    (find,) = cluster.requests(FindCoordinatorRequest)
    assert find.body.coordinator_keys == ["sink-q-0-0", "sink-q-1-0", "sink-q-2-0"]
    # Each to its own coordinator, all sent before any answer was polled for.
    assert [(n, b.transactional_id) for n, b, _ in _end_txns(cluster)] == [
        (0, "sink-q-0-0"),
        (1, "sink-q-1-0"),
        (1, "sink-q-2-0"),
    ]
    assert len(set(polls_at_send)) == 1
    assert len(cluster.requests(ApiVersionsRequest)) == 1  # finalized features asked once
    assert cluster.closed


def test_complete_transactions_retries_only_what_got_a_retriable_answer(
    cluster: ScriptedCluster,
) -> None:
    cluster.end_txn = [NONE, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, NONE, NONE]
    results = complete_transactions(CONFIG, HANDLES)
    assert [r.error for r in results] == [None, None, None]
    sent = [b.transactional_id for _, b, _ in _end_txns(cluster)]
    assert sent == ["sink-q-0-0", "sink-q-1-0", "sink-q-2-0", "sink-q-1-0", "sink-q-2-0"]
    # NOT_COORDINATOR: the coordinator may have moved, so it is looked up again.
    finds = cluster.requests(FindCoordinatorRequest)
    assert [f.body.coordinator_keys for f in finds] == [
        ["sink-q-0-0", "sink-q-1-0", "sink-q-2-0"],
        ["sink-q-2-0"],
    ]


def test_complete_transactions_finds_a_new_coordinator_when_the_old_one_died(
    cluster: ScriptedCluster,
) -> None:
    # FindCoordinator names node 1, which died since: connecting to it fails. Its ids are looked
    # up again (the controller moves them once it fences the node) instead of failing them all.
    cluster.coordinator_of = {"sink-q-0-0": 0, "sink-q-1-0": 1, "sink-q-2-0": 1}
    original = cluster._answer

    def answer(sent: Sent) -> Any:
        if (
            isinstance(sent.body, FindCoordinatorRequest)
            and len(cluster.requests(FindCoordinatorRequest)) > 1
        ):
            cluster.coordinator_of = {k: 0 for k in cluster.coordinator_of}
        return original(sent)

    cluster._answer = answer  # type: ignore[method-assign]
    cluster.ready = lambda node_id, now_ms: node_id != 1  # type: ignore[method-assign]
    cluster.is_connection_failed = lambda node_id: node_id == 1  # type: ignore[method-assign]
    results = complete_transactions(CONFIG, HANDLES, timeout=30)
    assert [r.error for r in results] == [None, None, None]
    assert {n for n, _, _ in _end_txns(cluster)} == {0}
    assert len(cluster.requests(FindCoordinatorRequest)) == 2


def test_complete_transactions_reports_each_failure_and_what_was_done(
    cluster: ScriptedCluster,
) -> None:
    # The first commits, the second is gone (fenced), the third gets no answer before the
    # deadline: each outcome is told apart, nothing raises.
    cluster.end_txn = [NONE, PRODUCER_FENCED, SILENT]
    results = complete_transactions(CONFIG, HANDLES, timeout=5)
    assert results[0] == Completion(HANDLES[0], (100, 2))
    assert isinstance(results[1].error, TransactionLostError)
    assert "sink-q-1-0" in str(results[1].error)
    assert isinstance(results[2].error, KafkaTimeoutError)
    assert "did not finish within 5000 ms" in str(results[2].error)
    assert "'sink-q-2-0'" in str(results[2].error)
    assert cluster.clock.now_ms() <= 5_000 + 200  # bounded by the one deadline
    assert cluster.closed


def test_complete_transactions_with_nothing_sends_nothing(cluster: ScriptedCluster) -> None:
    assert complete_transactions(CONFIG, []) == []
    assert cluster.sent == []


def test_the_drivers_ops_use_one_client_and_report_each_outcome(
    cluster: ScriptedCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kafka_sink.spark.driver.eos.committer import listing_ops

    opened: list[object] = []
    real = AdminClient.from_config

    def counting(config: Mapping[str, object], clock: object = None) -> Any:
        opened.append(config)
        return real(config)

    monkeypatch.setattr(AdminClient, "from_config", staticmethod(counting))
    cluster.owned = {1: [("sink-q-0-0", 100, 1, "Ongoing")]}
    ops = listing_ops(CONFIG, timeout_s=5)
    assert [t.transactional_id for t in ops.list_open("sink-q-")] == ["sink-q-0-0"]
    assert ops.complete_all is not None
    assert ops.complete_all(HANDLES[:2], True) == [None, None]
    cluster.end_txn = [NONE, PRODUCER_FENCED, SILENT]
    done, lost, unanswered = ops.complete_all(HANDLES, True)
    assert done is None
    assert isinstance(lost, TransactionLostError)
    assert isinstance(unanswered, KafkaTimeoutError)  # may clear: the committer retries it
    assert ops.describe is not None
    described = ops.describe(["sink-q-0-0", "sink-q-9-9"])
    assert described["sink-q-9-9"] is None
    assert (described["sink-q-0-0"].state, described["sink-q-0-0"].producer_epoch) == (
        "Ongoing",
        1,
    )
    ops.close()
    assert len(opened) == 1 and cluster.closed


def test_complete_transactions_sends_no_more_than_a_connection_takes_at_once(
    cluster: ScriptedCluster,
) -> None:
    # Six transactions on one coordinator that takes two requests at a time: the rest wait
    # for answers instead of failing.
    cluster.max_in_flight = 2
    handles = [PreparedTransaction(f"sink-q-{i}-0", 100 + i, 1, [("t", i)]) for i in range(6)]
    results = complete_transactions(CONFIG, handles)
    assert [r.error for r in results] == [None] * 6
    assert sorted(b.transactional_id for _, b, _ in _end_txns(cluster)) == sorted(
        h.transactional_id for h in handles
    )


def test_describe_asks_each_coordinator_once_for_its_ids_and_asks_again_when_loading(
    cluster: ScriptedCluster,
) -> None:
    cluster.coordinator_of = {"job-1": 0, "job-2": 1, "job-3": 1}
    cluster.owned = {0: [("job-1", 10, 0, "Ongoing")], 1: [("job-2", 12, 3, "CompleteAbort")]}
    original = cluster._answer
    loading = [True]

    def answer(sent: Sent) -> Any:
        to_node_0 = isinstance(sent.body, DescribeTransactionsRequest) and sent.request.node_id == 0
        if to_node_0 and loading and loading.pop():
            state = DescribeTransactionsResponse.TransactionState(
                COORDINATOR_LOAD_IN_PROGRESS, "job-1", "", 0, -1, -1, -1, []
            )
            return DescribeTransactionsResponse(transaction_states=[state])
        return original(sent)

    cluster._answer = answer  # type: ignore[method-assign]
    found = describe_transactions(CONFIG, ["job-3", "job-1", "job-2"])
    assert found["job-3"] is None  # TRANSACTIONAL_ID_NOT_FOUND
    assert (found["job-1"].state, found["job-1"].coordinator_id) == ("Ongoing", 0)  # type: ignore[union-attr]
    assert found["job-2"].state == "CompleteAbort"  # type: ignore[union-attr]
    asked = [
        (s.request.node_id, tuple(s.body.transactional_ids))
        for s in cluster.requests(DescribeTransactionsRequest)
    ]
    assert asked == [(0, ("job-1",)), (1, ("job-2", "job-3")), (0, ("job-1",))]
    with pytest.raises(ValueError, match="non-empty"):
        describe_transactions(CONFIG, [""])
