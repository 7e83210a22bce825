"""Each test starts as a new driver: no fence token nor intent position kept from another
test's coordinator."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafka_sink.spark.eos import fence, kafka_intents


@pytest.fixture(autouse=True)
def _new_driver(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("SPARK_LOCAL_DIRS", raising=False)
    fence._HELD.clear()
    kafka_intents._POSITIONS.clear()
    yield
    fence._HELD.clear()
    kafka_intents._POSITIONS.clear()
