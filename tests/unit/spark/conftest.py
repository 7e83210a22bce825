"""Each test starts as a new driver: no fence token nor intent position kept from another
test's coordinator. ``coord`` is a fresh fake TV2 coordinator (``tests/fakes/coordinator.py``) on
its own manual clock, ``store`` a fresh in-memory intent store whose reads and writes a test can
make fail (``eos_support.FaultyStore``). The data source's preflight asks a real cluster, so its
calls are skipped unless the test asks for the ``live_preflight`` fixture (the preflight's own
tests use fakes)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafka_sink.spark import datasource
from kafka_sink.spark.driver import preflight
from kafka_sink.spark.driver.eos import fence, kafka_intents
from tests.fakes.coordinator import FakeCoordinator
from tests.unit.spark.eos_support import FaultyStore


@pytest.fixture
def live_preflight(monkeypatch: pytest.MonkeyPatch) -> None:
    """The data source's preflight runs, as a new driver process's would."""
    monkeypatch.setattr(preflight, "_PASSED", set())
    monkeypatch.setattr(preflight, "_TRANSACTIONAL_PASSED_MS", {})


@pytest.fixture(autouse=True)
def _new_driver(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[None]:
    monkeypatch.delenv("SPARK_LOCAL_DIRS", raising=False)
    if "live_preflight" not in request.fixturenames:
        monkeypatch.setattr(datasource, "check_write", lambda *_a, **_k: None)
        monkeypatch.setattr(datasource, "check_transactional_ids", lambda *_a, **_k: None)
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
