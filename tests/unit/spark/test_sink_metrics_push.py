"""The Pushgateway push against a gateway that answers one byte per 0.5 s, or too much.

The gateway is a real loopback peer (``tests.fakes.http_peer``); the push must end within its
timeout, whole, and come back as one WARNING, the batch being committed already.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from kafka_sink.spark.metrics import prometheus
from tests.fakes.http_peer import ENDLESS_HEAD, response_head, serving

MARGIN_S = 0.75
SECTION: dict[str, Any] = {
    "partitions": [
        {"topic": "t", "partition": 0, "records": 2, "uncompressed_bytes": 9, "compressed_bytes": 7}
    ],
    "retries": 0,
    "errors": 0,
    "requests": 1,
    "produce_latency_ms_avg": 4.0,
    "throttle_time_ms_sum": 0.0,
    "records": 2,
    "records_per_s": 10.0,
    "compression_ratio": 1.3,
    "produce_latency_ms_max": 4.0,
    "commit_duration_ms": 12.0,
}


def _push(url: str, caplog: pytest.LogCaptureFixture, timeout_s: float) -> tuple[bool, float]:
    began = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="kafka_sink"):
        pushed = prometheus.push_batch(
            SECTION, gateway=url, job="etl", query="q1", batch_id=3, timeout_s=timeout_s
        )
    return pushed, time.monotonic() - began


def _warning(caplog: pytest.LogCaptureFixture) -> str:
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    return warning.getMessage()


def test_a_pushgateway_dripping_its_answer_is_cut_at_the_push_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with serving(b"", ENDLESS_HEAD, interval_s=0.5) as peer:
        pushed, took = _push(peer.url, caplog, timeout_s=1.0)
    assert pushed is False
    assert 0.9 < took < 1.0 + MARGIN_S
    assert peer.requests[0].startswith(b"PUT /metrics/job/etl/query/q1 HTTP/1.1\r\n")
    text = _warning(caplog)
    assert "pushing batch 3 to the Pushgateway" in text and "timed out" in text


def test_the_push_timeout_is_five_seconds_whole() -> None:
    assert prometheus.PUSH_TIMEOUT_S == 5.0


def test_a_pushgateway_answering_more_than_the_cap_fails_the_push(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with serving(response_head(length=400 * 2**20), b"x", interval_s=5.0) as peer:
        pushed, took = _push(peer.url, caplog, timeout_s=3.0)
    assert pushed is False and took < 1.0
    assert f"larger than {prometheus.PUSH_ANSWER_BYTES} bytes" in _warning(caplog)


@pytest.mark.parametrize(
    ("status", "pushed"), [(200, True), (202, True), (307, False), (500, False)]
)
def test_a_push_succeeds_on_a_2xx_answer_only(
    caplog: pytest.LogCaptureFixture, status: int, pushed: bool
) -> None:
    with serving(response_head(status, length=0, extra="Location: /x\r\n")) as peer:
        assert _push(peer.url, caplog, timeout_s=3.0)[0] is pushed
    body = peer.requests[0].partition(b"\r\n\r\n")[2]
    assert b'pykafka_records_total{partition="0",topic="t"} 2.0' in body
    if not pushed:
        assert f"HTTP {status}" in _warning(caplog)
