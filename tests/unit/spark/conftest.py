"""Each test starts as a new driver: no fence token nor intent position kept from another
test's coordinator. The data source's preflight asks a real cluster, so its calls are skipped
unless the test asks for the ``live_preflight`` fixture (the preflight's own tests use fakes)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafka_sink.spark import datasource, preflight
from kafka_sink.spark.eos import fence, kafka_intents


@pytest.fixture
def live_preflight(monkeypatch: pytest.MonkeyPatch) -> None:
    """The data source's preflight runs, as a new driver process's would."""
    monkeypatch.setattr(preflight, "_PASSED", set())


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
