"""The exactly-once sink learns the brokers' transaction.max.timeout.ms (DescribeConfigs)."""

from __future__ import annotations

import pytest

from kafka_sink.sink_errors import SinkOptionError
from kafka_sink.spark.driver.eos import timeout as eos_timeout
from kafka_sink.spark.driver.eos.timeout import (
    broker_max_transaction_timeout_ms,
    resolve_transaction_timeout_ms,
)

pytestmark = pytest.mark.broker


@pytest.fixture(autouse=True)
def _no_cache() -> None:
    eos_timeout._cache.clear()


def test_the_brokers_maximum_is_learned(kafka_bootstrap: str) -> None:
    config = {"bootstrap.servers": kafka_bootstrap}
    assert broker_max_transaction_timeout_ms(config) == 900_000  # Kafka's default
    assert resolve_transaction_timeout_ms(config) == 900_000
    with pytest.raises(SinkOptionError, match=r"above the brokers' transaction.max.timeout.ms"):
        resolve_transaction_timeout_ms({**config, "transaction.timeout.ms": "900001"})


def test_an_unreachable_cluster_leaves_the_default(caplog: pytest.LogCaptureFixture) -> None:
    config = {"bootstrap.servers": "127.0.0.1:1", "max.block.ms": "1500"}
    with caplog.at_level("WARNING", logger="kafka_sink.spark"):
        assert broker_max_transaction_timeout_ms(config, timeout_s=1.0) is None
    assert "could not learn the brokers' transaction.max.timeout.ms" in caplog.text
