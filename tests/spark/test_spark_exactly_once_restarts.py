"""deliveryGuarantee=exactly-once across repeated driver kills: a streaming query, run in its own
process (``eos_restart_child.py``), is SIGKILLed at random points and restarted from its
checkpoint, 4 times (the chaos run adds kills at random moments), one of the kills inside the
driver's ``commit()`` once the batch's intent is recorded and before its EndTxns (the test-only
pause of ``eos/committer.py``); a last run finishes the input. A read_committed consumer
(kafka-python) then reads every row exactly once, no transaction of the query stays open, and the
commit log names every batch. With at-least-once the same kills leave duplicates, so the test can
fail. 3 Kafka nodes, min ISR 2.
"""

from __future__ import annotations

import os
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from eos_driver import Driver, drop_cut_metadata_writes
from sparkutil import assert_nothing_left_open, commit_docs

from kafka_sink.testing.local_kafka import LocalKafka
from kafka_sink.testing.oracle import read_all

pytestmark = pytest.mark.slow

TopicFactory = Callable[..., str]
FILES = 12
ROWS_PER_FILE = 300


def _inputs(directory: Path) -> None:
    directory.mkdir()
    for n in range(FILES):
        start = n * ROWS_PER_FILE
        tmp = directory / f".in{n:02d}.tmp"
        tmp.write_text("".join(f"{i}\n" for i in range(start, start + ROWS_PER_FILE)))
        tmp.rename(directory / f"in{n:02d}.txt")


@pytest.mark.parametrize("guarantee,kills", [("exactly-once", 4), ("at-least-once", 1)])
def test_driver_killed_at_random_points_and_restarted(
    kafka_cluster: LocalKafka,
    cluster_topic_factory: TopicFactory,
    tmp_path: Path,
    guarantee: str,
    kills: int,
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    topic = cluster_topic_factory(
        partitions=3, replication_factor=3, configs={"min.insync.replicas": "2"}
    )
    prefix = f"eos-kill-{uuid.uuid4().hex[:8]}"
    _inputs(tmp_path / "in")
    checkpoint = tmp_path / "checkpoint"
    args = [bootstrap, topic, str(tmp_path / "in"), str(checkpoint), guarantee, prefix]
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    pause_dir = tmp_path / "pause"
    pause_dir.mkdir()
    # The third run is killed inside commit(): with exactly-once once the intent is recorded,
    # before the EndTxns; with at-least-once once every row was acknowledged, before Spark
    # recorded the batch (its re-run must then duplicate rows).
    paused_kill_at = 2 if kills > 2 else 0
    killed = 0
    run = 0
    while killed < kills:
        drop_cut_metadata_writes(checkpoint)
        env = dict(os.environ)
        if run == paused_kill_at:
            env["PYKAFKA_TEST_COMMIT_PAUSE_DIR"] = str(pause_dir)
        driver = Driver(args, tmp_path / f"run{run}.log", env)
        run += 1
        if not driver.wait_started():
            assert driver.finish() == 0, driver.tail()
            break  # the input ran out before the kills: enough were done below
        if "PYKAFKA_TEST_COMMIT_PAUSE_DIR" in env:
            deadline = time.monotonic() + 180
            while not any(pause_dir.glob("paused-*")):
                assert driver.process.poll() is None, driver.tail()
                assert time.monotonic() < deadline, "the commit never reached its pause"
                time.sleep(0.1)
        else:
            time.sleep(rng.uniform(0.5, 5.0))
        driver.kill()
        killed += 1
    assert killed >= kills, f"only {killed} kills before the input ran out (seed {seed})"
    assert list(pause_dir.glob("paused-*")), "the kill inside commit() never happened"
    last = Driver(args, tmp_path / "last.log", dict(os.environ))
    assert last.finish() == 0, last.tail()

    total = FILES * ROWS_PER_FILE
    committed = read_all(bootstrap, topic, expected=total, isolation_level="read_committed")
    counts = Counter(int(r.value) for r in committed)
    assert set(counts) == set(range(total)), f"rows lost (seed {seed})"
    duplicated = sum(1 for c in counts.values() if c > 1)
    docs = commit_docs(checkpoint / "pykafka-commits", "[0-9]*.json")
    done = {d["batch_id"] for d in docs if "failed_tasks" not in d}
    assert done == set(range(FILES)), sorted(done)
    if guarantee == "at-least-once":
        assert duplicated > 0, f"no duplicates after {killed} kills (seed {seed})"
        return
    assert duplicated == 0, f"{duplicated} rows read twice (seed {seed})"
    assert_nothing_left_open(bootstrap, topic, prefix)
