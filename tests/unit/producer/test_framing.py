"""The framing the producer counts against max.request.size bounds the encoded ProduceRequest.

Every Produce version this client sends (3-12), short and long client ids, transactional ids
and topic names, one and many partitions and topics, small and large record batches: the
encoded request (after its size prefix, as the broker counts socket.request.max.bytes) is never
larger than the counted size, and a lone batch's request fits its single-partition framing.
(The accumulator's drain counting it: ``test_accumulator.py``.)
"""

from __future__ import annotations

import pytest

from kafka_sink.producer.framing import (
    PARTITION_FRAMING,
    request_framing,
    single_partition_framing,
    topic_framing,
)
from kafka_sink.wire import messages as m
from kafka_sink.wire.protocol import encode_request


def _request(
    transactional_id: str | None, layout: dict[str, list[int]]
) -> tuple[m.ProduceRequest, int]:
    """A request with one batch of the given size per partition, and its counted size."""
    counted = 0
    topics = []
    for topic, sizes in layout.items():
        counted += topic_framing(topic)
        parts = []
        for index, size in enumerate(sizes):
            parts.append(m.ProduceRequest.PartitionProduceData(index, b"r" * size))
            counted += PARTITION_FRAMING + size
        topics.append(m.ProduceRequest.TopicProduceData(topic, parts))
    return m.ProduceRequest(transactional_id, -1, 30000, topics), counted


@pytest.mark.parametrize("version", range(3, 13))
@pytest.mark.parametrize("client_id", [None, "", "c", "producer-" + "x" * 300])
@pytest.mark.parametrize("transactional_id", [None, "t", "spark-" + "é" * 200])
@pytest.mark.parametrize(
    "layout",
    [
        {"t": [70]},
        {"events": [1_046_000]},
        {"a" * 249: [100, 20_000, 1]},
        {f"topic-{i}": [70] * 40 for i in range(20)},
    ],
)
def test_the_counted_size_bounds_the_encoded_request(
    version: int,
    client_id: str | None,
    transactional_id: str | None,
    layout: dict[str, list[int]],
) -> None:
    request, counted = _request(transactional_id, layout)
    counted += request_framing(client_id, transactional_id)
    encoded = encode_request(request, version, 7, client_id)
    assert len(encoded) <= counted
    # An upper bound, not a guess far above: within a few bytes per entry.
    entries = 1 + len(layout) + sum(len(sizes) for sizes in layout.values())
    assert counted - len(encoded) <= 10 * entries


def test_a_lone_batch_counts_the_request_around_it() -> None:
    request, counted = _request("tx", {"events": [500]})
    framing = single_partition_framing("client", "tx", "events")
    assert counted - 500 + request_framing("client", "tx") == framing
    assert len(encode_request(request, 12, 1, "client")) <= 500 + framing
