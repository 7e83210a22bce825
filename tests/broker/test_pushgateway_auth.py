"""``metricsPushGateway`` with credentials against a real Pushgateway that asks for them.

The gateway (``LocalPushgateway`` with ``basic_auth``) runs with a ``--web.config.file`` whose
user's bcrypt hash is below; the password holds every character that ends a URL's authority or
user info, percent-encoded in the option as it must be.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator

import pytest

from kafka_sink.spark.metrics.prometheus import gateway_url, push_batch
from kafka_sink.testing.pushgateway import LocalPushgateway

USER = "pusher"
PASSWORD = "Zq1/?#@:Xk2"
#: bcrypt (cost 4) of PASSWORD, as the Pushgateway's web config takes it.
PASSWORD_BCRYPT = "$2b$04$HSn22oqaproKnSEgesJkcO3RgtaI/oigT2mx/ckuUZiMWf.W4cHg6"

SECTION = {
    "partitions": [
        {
            "topic": "t",
            "partition": 0,
            "records": 3,
            "uncompressed_bytes": 30,
            "compressed_bytes": 20,
        }
    ],
    "retries": 0,
    "errors": 0,
    "requests": 1,
    "produce_latency_ms_avg": 2.0,
    "produce_latency_ms_max": 2,
    "throttle_time_ms_sum": 0,
    "records": 3,
    "records_per_s": 100.0,
    "compression_ratio": 1.5,
    "commit_duration_ms": 4,
}


@pytest.fixture(scope="module")
def secured_gateway() -> Iterator[LocalPushgateway]:
    with LocalPushgateway(basic_auth=(USER, PASSWORD, PASSWORD_BCRYPT)) as gateway:
        yield gateway


def _with_credentials(url: str, password: str) -> str:
    return url.replace("http://", f"http://{USER}:{urllib.parse.quote(password, safe='')}@")


def test_credentials_in_the_gateway_url_authenticate_the_push(
    secured_gateway: LocalPushgateway,
) -> None:
    url = gateway_url(_with_credentials(secured_gateway.url, PASSWORD))
    assert push_batch(SECTION, gateway=url, job="auth-ok", query="q1", batch_id=7)
    groups = [g for g in secured_gateway.metrics() if g["labels"].get("job") == "auth-ok"]
    assert len(groups) == 1 and groups[0]["labels"]["query"] == "q1"
    records = groups[0]["pykafka_records_total"]["metrics"]
    assert [(m["labels"]["topic"], m["value"]) for m in records] == [("t", "3")]


def test_a_wrong_password_is_refused_by_the_gateway_and_not_shown(
    secured_gateway: LocalPushgateway, caplog: pytest.LogCaptureFixture
) -> None:
    url = gateway_url(_with_credentials(secured_gateway.url, "Wj3/wrong"))
    assert not push_batch(SECTION, gateway=url, job="auth-bad", query="q1", batch_id=1)
    assert "401" in caplog.text and "Wj3" not in caplog.text and "wrong" not in caplog.text
    assert not [g for g in secured_gateway.metrics() if g["labels"].get("job") == "auth-bad"]
