"""deliveryGuarantee=exactly-once: a restarted streaming query ends, before its first batch's
tasks run, the transactions its killed driver left open (prepared by the tasks, never committed,
named by no intent), so read_committed readers are not held back for ``transaction.timeout.ms``
(10 minutes here). The driver is SIGKILLed inside ``commit()`` before anything is recorded; a
restart with the start sweep left out (by the test, ``weakened.py``) still holds the last stable
offset behind; a restart with it brings the last stable offset to the log end within seconds, and an
independent read_committed consumer (kafka-python) reads every row exactly once.
"""

from __future__ import annotations

import os
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from eos_driver import Driver, drop_cut_metadata_writes, wait_for
from sparkutil import assert_nothing_left_open, stable_offsets
from weakened import weakened_env

from kafka_sink.spark.fault_hooks import BEFORE_COMMIT
from kafka_sink.spark.fault_hooks import STARTED as STARTED_POINT
from kafka_sink.testing.oracle import end_offsets, read_all
from tests.fault_site.fault_env import PAUSE_ENV, POINT_ENV

# A fault proof: `-m "not slow"` leaves it out, CI runs it.
pytestmark = pytest.mark.slow

TopicFactory = Callable[..., str]
ROWS = 600
QUICK_S = 5.0


def _behind(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """Partition -> (last stable offset, log end) where the first is behind."""
    stable, end = stable_offsets(bootstrap, topic), end_offsets(bootstrap, topic)
    return {p: (stable[p], end[p]) for p in end if stable[p] != end[p]}


def test_a_restart_ends_what_the_killed_driver_left_open_before_its_first_batch(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    topic = topic_factory(partitions=3)
    prefix = f"eos-start-{uuid.uuid4().hex[:8]}"
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "in00.txt").write_text("".join(f"{i}\n" for i in range(ROWS)))
    checkpoint = tmp_path / "checkpoint"
    pause = tmp_path / "pause"
    pause.mkdir()
    args = [kafka_bootstrap, topic, str(inputs), str(checkpoint), "exactly-once", prefix]
    args.append("kafka.transaction.timeout.ms=600000")

    def run(name: str, point: str, *, start_sweep: bool = True) -> Driver:
        drop_cut_metadata_writes(checkpoint)
        env = {**os.environ, PAUSE_ENV: str(pause), POINT_ENV: point}
        if not start_sweep:  # the driver and its Python workers leave the sweep out
            env = weakened_env(env, tmp_path / "unswept-path", start_sweep=False)
        driver = Driver(args, tmp_path / f"{name}.log", env)
        assert driver.wait_started(), driver.tail()
        return driver

    # 1. The tasks of batch 0 prepared their transactions; the driver dies in commit().
    first = run("first", BEFORE_COMMIT)
    wait_for(pause / f"paused-{BEFORE_COMMIT}-0", first)
    first.kill()
    assert _behind(kafka_bootstrap, topic), "the killed run left nothing open"

    # 2. Without the start sweep, a restart held before its tasks leaves readers held back.
    unswept = run("unswept", STARTED_POINT, start_sweep=False)
    wait_for(pause / f"paused-{STARTED_POINT}", unswept)
    time.sleep(QUICK_S)
    still = _behind(kafka_bootstrap, topic)
    unswept.kill()
    assert still, "the last stable offset reached the log end without the start sweep"
    (pause / f"paused-{STARTED_POINT}").unlink()

    # 3. With it: within seconds of the start, before any task, readers reach the log end.
    last = run("last", STARTED_POINT)
    wait_for(pause / f"paused-{STARTED_POINT}", last)
    deadline = time.monotonic() + QUICK_S
    while behind := _behind(kafka_bootstrap, topic):
        assert time.monotonic() < deadline, f"still behind after the start sweep: {behind}"
        time.sleep(0.2)
    (pause / f"resume-{STARTED_POINT}").touch()
    assert last.finish() == 0, last.tail()
    assert "query start: aborted" in last.log.read_text() and repr(prefix) in last.log.read_text()

    committed = read_all(kafka_bootstrap, topic, expected=ROWS, isolation_level="read_committed")
    counts = Counter(int(r.value) for r in committed)
    assert set(counts) == set(range(ROWS)) and max(counts.values()) == 1, counts.most_common(3)
    assert_nothing_left_open(kafka_bootstrap, topic, prefix)
