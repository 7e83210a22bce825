"""The test-only hook that makes a refused commit's marker unreadable (``fault_hooks.faults``, as
``tests/fault_site/fault_env.py`` installs it): while ``marker-unreadable`` exists in the pause
directory the driver's marker read fails before it reaches a broker, the outcome is unknown (never
lost), and once the file is gone it reads again. The package's default faults fail no read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafka_sink.admin.control_records import ControlRecordReader
from kafka_sink.errors import KafkaError, TransactionLostError
from kafka_sink.prepared import PreparedTransaction
from kafka_sink.spark import fault_hooks
from kafka_sink.spark.driver.eos.outcomes import marker_reader, settle_lost
from tests.fault_site.fault_env import MARKER_UNREADABLE, PAUSE_ENV, EnvFaults

TID = "q-1-0"
PREPARED = PreparedTransaction(TID, producer_id=7, producer_epoch=3, partitions=(("t", 1),))


class _Reader:
    """Marker reads that find COMMIT without a broker, counted."""

    reads = 0


def _finds_commit(reader: ControlRecordReader, prepared: PreparedTransaction, first: Any) -> bool:
    _Reader.reads += 1
    return True


@pytest.fixture(autouse=True)
def env_faults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fault_hooks, "faults", EnvFaults())


@pytest.fixture
def reader(monkeypatch: pytest.MonkeyPatch) -> type[_Reader]:
    _Reader.reads = 0
    unconnected = object.__new__(ControlRecordReader)
    monkeypatch.setattr(ControlRecordReader, "from_config", classmethod(lambda *_: unconnected))
    monkeypatch.setattr(ControlRecordReader, "transaction_outcome", _finds_commit)
    monkeypatch.setattr(ControlRecordReader, "close", lambda self: None)
    return _Reader


def test_the_hook_is_on_only_while_its_file_exists(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(PAUSE_ENV, raising=False)
    (tmp_path / MARKER_UNREADABLE).touch()
    assert not fault_hooks.marker_unreadable()  # unset, as in any real deployment
    monkeypatch.setenv(PAUSE_ENV, str(tmp_path))
    assert fault_hooks.marker_unreadable()
    (tmp_path / MARKER_UNREADABLE).unlink()
    assert not fault_hooks.marker_unreadable()


def test_a_marker_read_fails_while_the_file_exists_and_reads_again_once_it_is_gone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, reader: type[_Reader]
) -> None:
    monkeypatch.setenv(PAUSE_ENV, str(tmp_path))
    outcome = marker_reader({"bootstrap.servers": "127.0.0.1:9"}, 1.0)
    (tmp_path / MARKER_UNREADABLE).touch()
    with pytest.raises(KafkaError) as denied:
        outcome(PREPARED, {("t", 1): 0})
    assert repr(TID) in str(denied.value) and "a test's fault hook" in str(denied.value)
    assert reader.reads == 0  # refused before any broker is asked
    (tmp_path / MARKER_UNREADABLE).unlink()
    assert outcome(PREPARED, {("t", 1): 0}) is True and reader.reads == 1


def test_an_unreadable_marker_makes_a_refused_commit_unknown_never_lost(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, reader: type[_Reader]
) -> None:
    monkeypatch.setenv(PAUSE_ENV, str(tmp_path))
    (tmp_path / MARKER_UNREADABLE).touch()
    refused = TransactionLostError(f"the commit of {TID!r} was refused: PRODUCER_FENCED")
    settled = settle_lost(
        [("task", refused)],
        lambda _: PREPARED,
        lambda _: {("t", 1): 0},
        marker_reader({"bootstrap.servers": "127.0.0.1:9"}, 1.0),
    )
    assert not settled.committed and not settled.lost
    [(task, error, why)] = settled.unknown
    assert task == "task" and error is refused and "fault hook" in str(why)


def test_without_the_pause_directory_the_marker_is_read(
    monkeypatch: pytest.MonkeyPatch, reader: type[_Reader]
) -> None:
    monkeypatch.delenv(PAUSE_ENV, raising=False)
    assert marker_reader({"bootstrap.servers": "127.0.0.1:9"}, 1.0)(PREPARED, {}) is True
    assert reader.reads == 1


def test_the_package_default_fails_no_marker_read_whatever_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, reader: type[_Reader]
) -> None:
    monkeypatch.setattr(fault_hooks, "faults", fault_hooks.Faults())
    monkeypatch.setenv(PAUSE_ENV, str(tmp_path))
    (tmp_path / MARKER_UNREADABLE).touch()
    assert not fault_hooks.marker_unreadable()
    assert marker_reader({"bootstrap.servers": "127.0.0.1:9"}, 1.0)(PREPARED, {}) is True
    assert reader.reads == 1
