"""deliveryGuarantee=exactly-once: a zombie driver is fenced.

A streaming query's driver is stopped (SIGSTOP of every process of its session) inside
``commit()`` of batch 0, its tasks' transactions prepared; a new application on the same
checkpoint takes the query over and commits batch 0; the old driver is resumed (SIGCONT) while
the new one holds batch 1 prepared. With the fence the old driver stops with the fenced error,
touching nothing, and the new one completes every batch; without it (test-only switch) the old
driver's sweep aborts the new driver's prepared batch 1, whose commit then fails. An independent
read_committed consumer (kafka-python) reads every row exactly once, with nothing left open.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from eos_driver import Driver, wait_for
from sparkutil import assert_nothing_left_open
from weakened import weakened_env

from kafka_sink.spark.fault_hooks import BEFORE_COMMIT
from kafka_sink.testing.oracle import read_all
from tests.fault_site.fault_env import PAUSE_ENV, POINT_ENV

# A fault proof: `-m "not slow"` leaves it out, CI runs it.
pytestmark = pytest.mark.slow

TopicFactory = Callable[..., str]
FILES, ROWS = 3, 200


def _signal_session(driver: Driver, sig: signal.Signals) -> None:
    """Send ``sig`` to every process of the driver's session: pyspark's Python workers (which
    commit) run in process groups of their own, so signalling the driver's group misses them."""
    listed = subprocess.run(
        ["ps", "-o", "pid=", "-s", str(driver.process.pid)],
        capture_output=True,
        text=True,
        check=False,
    )
    for pid in listed.stdout.split():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), sig)


@pytest.mark.parametrize("fenced", [True, False], ids=["fenced", "unfenced"])
def test_a_resumed_old_driver_is_fenced_while_the_new_one_commits(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, fenced: bool
) -> None:
    topic = topic_factory(partitions=2)
    prefix = f"eos-zombie-{uuid.uuid4().hex[:8]}"
    inputs = tmp_path / "in"
    inputs.mkdir()
    for f in range(FILES):
        rows = range(f * ROWS, (f + 1) * ROWS)
        (inputs / f"in{f:02}.txt").write_text("".join(f"{i}\n" for i in rows))
    checkpoint = tmp_path / "checkpoint"
    pause = tmp_path / "pause"
    pause.mkdir()
    args = [kafka_bootstrap, topic, str(inputs), str(checkpoint), "exactly-once", prefix]
    args.append("kafka.transaction.timeout.ms=600000")
    env = {**os.environ, PAUSE_ENV: str(pause), POINT_ENV: BEFORE_COMMIT}
    if not fenced:  # both drivers and their Python workers take no fence
        env = weakened_env(env, tmp_path / "unfenced-path", fence=False)

    # 1. The old driver's tasks prepared batch 0; the driver is stopped inside commit().
    old = Driver(args, tmp_path / "old.log", env)
    assert old.wait_started(), old.tail()
    wait_for(pause / f"paused-{BEFORE_COMMIT}-0", old)
    _signal_session(old, signal.SIGSTOP)
    try:
        # 2. A new application takes the query over: batch 0 again, committed, then batch 1's
        # tasks prepared and its driver held before commit().
        (pause / f"paused-{BEFORE_COMMIT}-0").unlink()
        (pause / f"resume-{BEFORE_COMMIT}-0").touch()
        new = Driver(args, tmp_path / "new.log", env)
        assert new.wait_started(), new.tail()
        wait_for(pause / f"paused-{BEFORE_COMMIT}-1", new)
    finally:
        # 3. The old driver wakes up while the new one commits.
        _signal_session(old, signal.SIGCONT)
    old_code = old.finish(240)
    (pause / f"resume-{BEFORE_COMMIT}-1").touch()
    (pause / f"resume-{BEFORE_COMMIT}-2").touch()
    new_code = new.finish(300)

    old_log = old.log.read_text(encoding="utf-8", errors="replace")
    new_log = new.log.read_text(encoding="utf-8", errors="replace")
    seen = Counter(
        r.value.decode() for r in read_all(kafka_bootstrap, topic, isolation_level="read_committed")
    )
    if not fenced:
        # The old driver swept the prefix on its way out, aborting the new driver's prepared
        # batch 1: a healthy batch of the new driver failed.
        assert new_code != 0 and "no longer open" in new_log, new.tail()
        return
    assert old_code != 0 and "SinkFencedError" in old_log, old.tail()
    assert f"transactionalIdPrefix {prefix!r}" in old_log
    assert new_code == 0, new.tail()
    assert seen == Counter(str(i) for i in range(FILES * ROWS))
    assert_nothing_left_open(kafka_bootstrap, topic, prefix)
