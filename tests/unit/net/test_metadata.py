"""Metadata: updates, leader epochs, topic errors, leader hints, refresh timing, waiting."""

from __future__ import annotations

import random
import threading
from types import SimpleNamespace

import pytest

from kafka_sink.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    ProducerClosedError,
    SaslAuthenticationError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from kafka_sink.net.metadata import ExponentialBackoff, Metadata, Node, PartitionInfo
from kafka_sink.wire.messages import MetadataResponse
from tests.fakes.metadata import metadata_response


def _response(
    partitions: list[tuple[int, int, int]] | None = None,
    *,
    topic_error: int = 0,
    brokers: tuple[int, ...] = (1, 2),
    partition_error: int = 0,
) -> MetadataResponse:
    """Topic "t" on brokers ``h1:9001``, ``h2:9002``, every broker a replica."""
    return metadata_response(
        "t",
        partitions or [],
        brokers=[(b, f"h{b}", 9000 + b) for b in brokers],
        replicas=brokers,
        topic_error=topic_error,
        partition_error=partition_error,
    )


def _metadata() -> Metadata:
    md = Metadata(
        metadata_max_age_ms=10_000,
        retry_backoff_ms=100,
        retry_backoff_max_ms=1_000,
        rng=random.Random(1),
    )
    md.bootstrap([("b1", 9092), ("b2", 9093)])
    md.add_topic("t")
    return md


def test_bootstrap_nodes_have_negative_ids_until_the_first_update() -> None:
    md = _metadata()
    assert [n.node_id for n in md.nodes()] == [-1, -2]
    assert md.fetch().is_bootstrap
    md.update(_response([(0, 1, 0)]), now_ms=0)
    assert sorted(n.node_id for n in md.nodes()) == [1, 2]
    assert md.node(-1) == Node(-1, "b1", 9092)  # still resolvable for its open connection
    assert not md.fetch().is_bootstrap


def test_update_partitions_leaders_and_version() -> None:
    md = _metadata()
    version = md.version
    md.update(_response([(1, 2, 4), (0, 1, 3)]), now_ms=5)
    assert md.version == version + 1
    assert md.partitions_for("t") == [
        PartitionInfo("t", 0, 1, 3, (1, 2), (1, 2)),
        PartitionInfo("t", 1, 2, 4, (1, 2), (1, 2)),
    ]
    assert md.leader_for("t", 1) == Node(2, "h2", 9002)
    assert md.leader_for("t", 2) is None
    assert md.partitions_for("other") is None
    assert md.fetch().cluster_id == "c"


def test_stale_leader_epoch_is_ignored() -> None:
    md = _metadata()
    md.update(_response([(0, 2, 7)]), now_ms=0)
    md.update(_response([(0, 1, 6)]), now_ms=1)  # an older broker view
    [p] = md.partitions_for("t") or []
    assert (p.leader_id, p.leader_epoch) == (2, 7)
    assert md.update_requested()  # ask again: someone is behind
    md.update(_response([(0, 1, 8)]), now_ms=2)
    [p] = md.partitions_for("t") or []
    assert (p.leader_id, p.leader_epoch) == (1, 8)


def test_leader_not_available_means_no_leader_and_a_refresh() -> None:
    md = _metadata()
    md.update(_response([(0, 1, 0)], partition_error=5), now_ms=0)
    assert md.leader_for("t", 0) is None
    assert md.update_requested()


def test_topic_errors_are_surfaced() -> None:
    md = _metadata()
    md.update(_response(topic_error=3), now_ms=0)
    assert isinstance(md.topic_error("t"), UnknownTopicOrPartitionError)
    assert md.partitions_for("t") is None
    assert md.update_requested()  # invalid-metadata errors keep refreshing
    md.update(_response(topic_error=29), now_ms=1)
    assert isinstance(md.topic_error("t"), TopicAuthorizationFailedError)
    md.update(_response([(0, 1, 0)]), now_ms=2)
    assert md.topic_error("t") is None


def test_response_without_brokers_is_a_failed_update() -> None:
    md = _metadata()
    md.update(_response([(0, 1, 0)], brokers=()), now_ms=0)
    assert md.version == 0
    assert md.last_error() is not None


def test_leader_hint_applies_only_when_newer_and_endpoint_known() -> None:
    md = _metadata()
    md.update(_response([(0, 1, 5)]), now_ms=0)
    version = md.version
    assert not md.update_leader("t", 0, 2, 5)  # same epoch: not newer
    assert not md.update_leader("t", 0, 2, 4)  # older
    assert not md.update_leader("t", 0, 9, 6)  # unknown node, no endpoint given
    assert not md.update_leader("t", 3, 2, 6)  # unknown partition
    assert not md.update_leader("x", 0, 2, 6)  # unknown topic
    assert md.version == version
    assert md.update_leader("t", 0, 2, 6)
    assert md.leader_for("t", 0) == Node(2, "h2", 9002)
    assert md.version == version + 1
    assert md.update_leader("t", 0, 9, 7, Node(9, "h9", 9009))
    assert md.leader_for("t", 0) == Node(9, "h9", 9009)


def test_time_to_next_update_honours_backoff_and_max_age() -> None:
    md = _metadata()
    assert md.time_to_next_update(0) == 0  # bootstrap: due at once
    md.update(_response([(0, 1, 0)]), now_ms=1_000)
    assert md.time_to_next_update(1_000) == 10_000  # metadata.max.age.ms
    assert md.time_to_next_update(6_000) == 5_000
    assert md.time_to_next_update(11_000) == 0
    md.request_update()
    # Requested right after a refresh: wait retry.backoff.ms (+-20 % jitter).
    assert 80 <= md.time_to_next_update(1_000) <= 120
    assert md.time_to_next_update(1_200) == 0


def test_failed_updates_back_off_exponentially_up_to_the_max() -> None:
    md = _metadata()
    waits = []
    now = 0
    for _ in range(6):
        md.failed_update(now, KafkaConnectionError("down"))
        wait = md.time_to_next_update(now)
        waits.append(wait)
        now += wait
    for wait, expected in zip(waits, [200, 400, 800, 1000, 1000, 1000], strict=True):
        assert expected * 0.8 <= wait <= min(expected * 1.2, 1000)
    md.update(_response([(0, 1, 0)]), now_ms=now)
    md.request_update()
    assert md.time_to_next_update(now) <= 120  # success resets the backoff


def test_new_topic_skips_the_failure_backoff() -> None:
    md = _metadata()
    md.failed_update(0)
    md.failed_update(0)
    assert md.time_to_next_update(0) > 0
    assert md.add_topic("new")
    assert not md.add_topic("new")
    assert md.time_to_next_update(0) == 0
    assert md.topics() == frozenset({"t", "new"})


def test_await_update_wakes_on_update_from_another_thread() -> None:
    md = _metadata()
    version = md.request_update()
    results: list[int] = []
    waiter = threading.Thread(target=lambda: results.append(md.await_update(version, 10_000)))
    waiter.start()
    md.update(_response([(0, 1, 0)]), now_ms=0)
    waiter.join(5)
    assert results == [version + 1]


def test_await_update_timeout_names_the_last_error() -> None:
    md = _metadata()
    md.record_error(KafkaConnectionError("connection to node -1 (b1:9092) refused"))
    with pytest.raises(KafkaTimeoutError, match=r"within 20 ms .*b1:9092\) refused"):
        md.await_update(md.version, 20)


def test_await_update_raises_fatal_errors_and_close() -> None:
    md = _metadata()
    md.fatal_error(SaslAuthenticationError("bad credentials"))
    with pytest.raises(SaslAuthenticationError):
        md.await_update(0, 1_000)
    md.update(_response([(0, 1, 0)]), now_ms=0)  # a success clears it
    assert md.await_update(0, 0) == 1
    md.close()
    with pytest.raises(ProducerClosedError):
        md.await_update(1, 1_000)


def test_rebootstrap_required_returns_to_bootstrap_nodes() -> None:
    md = _metadata()
    md.update(_response([(0, 1, 0)]), now_ms=0)
    # Metadata v13's top-level error (the wire layer stops at v12; any object with the fields).
    md.update(SimpleNamespace(error_code=129, brokers=[], topics=[]), now_ms=1)
    assert md.fetch().is_bootstrap
    assert [n.node_id for n in md.nodes()] == [-1, -2]
    # Partitions are kept (their count drives keyed partitioning); leaders are unknown for now.
    assert [p.partition for p in md.partitions_for("t") or []] == [0]
    assert md.leader_for("t", 0) is None
    assert md.time_to_next_update(1) == 0
    assert not md.rebootstrap(2)  # already bootstrapping


def test_exponential_backoff_bounds() -> None:
    backoff = ExponentialBackoff(50, 1_000, rng=random.Random(3))
    for attempts, expected in [(0, 50), (1, 100), (2, 200), (3, 400), (4, 800), (5, 1000)]:
        for _ in range(20):
            value = backoff.backoff_ms(attempts)
            assert expected * 0.8 <= value <= min(expected * 1.2, 1_000)
    assert ExponentialBackoff(0, 1_000).backoff_ms(3) == 0
    assert ExponentialBackoff(100, 100, jitter=0).backoff_ms(50) == 100


def test_idle_topics_expire_only_when_asked_to() -> None:
    md = Metadata(metadata_max_idle_ms=1_000)
    md.bootstrap([("b1", 9092)])
    md.add_topic("t", now_ms=0)
    md.add_topic("forever")  # no now_ms: never expires
    md.update(_response([(0, 1, 0)]), now_ms=500)
    assert md.partitions_for("t") is not None
    assert not md.add_topic("t", now_ms=900)  # used again: expires at 1900
    md.update(_response([(0, 1, 0)]), now_ms=1_500)
    assert md.topics() == frozenset({"t", "forever"})
    md.update(_response([(0, 1, 0)]), now_ms=1_900)
    assert md.topics() == frozenset({"forever"})
    assert md.partitions_for("t") is None


def test_a_use_without_a_time_keeps_the_idle_expiry() -> None:
    md = Metadata(metadata_max_idle_ms=1_000)
    md.bootstrap([("b1", 9092)])
    md.add_topic("t", now_ms=0)
    assert not md.add_topic("t")  # e.g. a caller without a clock: must not make it permanent
    md.update(_response([(0, 1, 0)]), now_ms=1_000)
    assert md.topics() == frozenset()
