"""Each test starts as a new driver: no fence token nor intent position kept from another
test's coordinator. ``coord`` is a fresh fake TV2 coordinator (``tests/fakes/coordinator.py``) on
its own manual clock, ``store`` a fresh in-memory intent store whose reads and writes a test can
make fail (``eos_support.FaultyStore``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafka_sink.spark.eos import fence, kafka_intents
from tests.fakes.coordinator import FakeCoordinator
from tests.unit.spark.eos_support import FaultyStore


@pytest.fixture(autouse=True)
def _new_driver(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("SPARK_LOCAL_DIRS", raising=False)
    fence._HELD.clear()
    kafka_intents._POSITIONS.clear()
    yield
    fence._HELD.clear()
    kafka_intents._POSITIONS.clear()


@pytest.fixture
def coord() -> FakeCoordinator:
    return FakeCoordinator()


@pytest.fixture
def store() -> FaultyStore:
    return FaultyStore()
