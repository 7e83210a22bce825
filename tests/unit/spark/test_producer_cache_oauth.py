"""Executors' tokens: the producers a worker process caches for one write (one per transactional
id with exactly-once) share one login, hence one token and one refresher, per OAUTHBEARER
configuration; a different configuration has its own; closing the last producer ends it."""

from __future__ import annotations

import time
from typing import Any

from kafka_sink.net.oauth.login import live_logins
from kafka_sink.net.oauth.token import OAuthBearerToken
from kafka_sink.spark.executor import producer_cache


class Source:
    def __init__(self, name: str) -> None:
        self.name = name

    def fetch(self) -> OAuthBearerToken:
        return OAuthBearerToken("a.b.c", int(time.time() * 1000) + 3_600_000)

    def describe(self) -> str:
        return f"test source {self.name}"


def _config(source: Source, transactional_id: str) -> tuple[tuple[str, Any], ...]:
    config = {
        "bootstrap.servers": "127.0.0.1:1",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.provider": source,
        "transactional.id": transactional_id,
    }
    return tuple(sorted(config.items()))


def test_one_login_per_process_and_oauth_configuration() -> None:
    from kafka_sink.producer.producer import KafkaProducer

    first, second = Source("first"), Source("second")
    try:
        producers = [
            producer_cache.acquire_transactional(_config(source, tid), KafkaProducer)[0]
            for source, tid in ((first, "p-0-0"), (first, "p-1-0"), (second, "p-0-0"))
        ]
        assert len({id(p) for p in producers}) == 3
        logins = live_logins()
        assert sorted(login.describe() for login in logins) == [
            "test source first",
            "test source second",
        ]
        for producer in producers:
            producer_cache.release(producer)
    finally:
        producer_cache.close_all(5.0)
    assert live_logins() == []
