"""A real stage re-attempt with a zombie: exactly-once on Spark ``local-cluster`` (two executor
JVMs) after an executor is lost, while a task of the write stage's first attempt still runs.

The job (``stage_reattempt_driver.py``, a child process): rows -> ``repartition(2, key)`` ->
a ``mapInArrow`` holding the first run of each write task -> ``format("pykafka")``. Steps:

1. Both write tasks of stage attempt 0 have fetched their shuffle input and hold (markers).
2. The test SIGKILLs the executor running partition 1 (it holds map outputs too). Partition 1's
   relaunch finds those outputs gone (FetchFailed): Spark re-runs the lost map tasks, then
   re-attempts the write stage, whose partition 0 is "attempt 0" again while the first stage
   attempt's partition 0 still holds on the other executor: the zombie.
3. The re-attempt's partition 0 writes and prepares, and Spark takes its commit message (its
   executor logs "Committed partition 0 ... stage N.1"); its partition 1 holds (a marker), so the
   job is not over: Spark kills the earlier attempt's tasks only when the stage finishes.
4. The test releases the zombie: it writes partition 0 again (Spark never uses its result: the
   partition is done) and the test waits until its rows are in the log.
5. The test releases the re-attempt's partition 1; the job ends and the driver commits.

With the slot choice (``eos/slots.py``) the zombie sees slot 0 held open and takes slot 1: the
job succeeds, the driver's sweep aborts the zombie's transaction, a read_committed consumer
(kafka-python) reads every row once and nothing is left open. With the choice disabled
(left out by the test, ``weakened.py``), the zombie's InitProducerId on slot 0 aborts the prepared
transaction of the re-attempt: the driver's check before the first commit finds it fenced, the
job fails naming that cause and nothing is visible.

Kafka is the 3-node cluster; the written topic has replication 3 and ``min.insync.replicas`` 2,
as does the intent topic the sink creates on it, so every acknowledged write and marker is on two
nodes at least, as in the deployments exactly-once is meant for.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from sparkutil import assert_nothing_left_open
from standalone import ROOT, SPARK_HOME
from weakened import weakened_env

from kafka_sink.admin.transactions import list_transactions
from kafka_sink.testing.local_kafka import LocalKafka
from kafka_sink.testing.oracle import read_all
from tests.conftest import TopicFactory

pytestmark = pytest.mark.slow

DRIVER = str(Path(__file__).with_name("stage_reattempt_driver.py"))
ROWS = 400
STEP_TIMEOUT_S = 300.0


@dataclass
class Outcome:
    output: str  # the driver's log
    zombie_rows: int  # partition 0's rows, written twice (re-attempt and zombie)
    ids_before_commit: dict[str, str]  # transactional id -> state, once the zombie wrote


class _Run:
    """The driver child in its own process group (its executors are in it too)."""

    def __init__(self, markers: Path, args: list[str], env: dict[str, str]) -> None:
        self.markers = markers
        self.log = markers / "driver.log"
        self._out = open(self.log, "w", encoding="utf-8")  # noqa: SIM115 (closed in close)
        self.process = subprocess.Popen(
            [sys.executable, DRIVER, str(markers), *args],
            stdout=self._out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def wait_for(self, *names: str, timeout_s: float = STEP_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while not all((self.markers / n).exists() for n in names):
            ended = self.process.poll() is not None
            if ended or time.monotonic() > deadline:
                have = sorted(p.name for p in self.markers.iterdir())
                raise AssertionError(
                    f"no {names} ({'driver ended' if ended else 'timed out'}); markers {have}; "
                    f"driver log tail:\n{self.output()[-4000:]}"
                )
            time.sleep(0.1)

    def marker(self, name: str) -> tuple[int, int]:
        pid, rows = (self.markers / name).read_text().split()
        return int(pid), int(rows)

    def finish(self, timeout_s: float = STEP_TIMEOUT_S) -> str:
        self.process.wait(timeout_s)
        return self.output()

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)
        self._out.close()


def _executors(app_id: str) -> set[int]:
    """The pids of the executor JVMs of application ``app_id``."""
    pids = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"org.apache.spark.executor.CoarseGrainedExecutorBackend" in cmdline and (
            app_id.encode() in cmdline
        ):
            pids.add(int(proc.name))
    return pids


@pytest.fixture
def bootstrap(kafka_cluster: LocalKafka) -> str:
    return kafka_cluster.bootstrap_servers


@pytest.fixture
def prefix() -> str:
    return f"reattempt-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def topic(cluster_topic_factory: TopicFactory) -> str:
    """Two partitions, one a write task, each on all three nodes and acknowledged by two."""
    return cluster_topic_factory(
        partitions=2, replication_factor=3, configs={"min.insync.replicas": "2"}
    )


@pytest.fixture
def markers(tmp_path: Path) -> Path:
    directory = tmp_path / "markers"
    directory.mkdir()
    return directory


def _run_scenario(
    markers: Path, bootstrap: str, topic: str, prefix: str, *, every_slot_free: bool
) -> Outcome:
    env = dict(os.environ)
    env.update(
        {
            "PYTHONPATH": str(ROOT),
            "SPARK_HOME": str(SPARK_HOME),
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
        }
    )
    if every_slot_free:  # the executors' Python workers (spark.executorEnv.PYTHONPATH)
        env = weakened_env(env, markers.parent / "every-slot-free-path", slot_choice=False)
    run = _Run(markers, [bootstrap, topic, prefix, str(ROWS)], env)
    try:
        # 1. Both write tasks of the first stage attempt hold their fetched input.
        run.wait_for("app", "first-p0", "first-p1")
        app_id = (markers / "app").read_text().strip()
        zombie_executor, zombie_rows = run.marker("first-p0")
        other_executor, _ = run.marker("first-p1")
        assert _executors(app_id) == {zombie_executor, other_executor}, run.output()
        # 2. Lose the other executor, and with it its map outputs.
        os.kill(other_executor, signal.SIGKILL)
        # 3. The re-attempt's partition 0 wrote and prepared (Spark accepted its commit
        # message); its partition 1 holds, so the job goes on and the zombie keeps running.
        _wait_for_log(app_id, _RERUN_COMMITTED, run)
        assert zombie_executor in _executors(app_id), "the zombie's executor was lost"
        # 4. The zombie writes partition 0 again, in a transaction of its own or not.
        (markers / "release-p0").touch()
        read_all(bootstrap, topic, expected=2 * zombie_rows, timeout_s=STEP_TIMEOUT_S)
        config = {"bootstrap.servers": bootstrap}
        ids = {t.transactional_id: t.state for t in list_transactions(config, prefix + "-")}
        # 5. The re-attempt's partition 1 writes; the driver commits.
        (markers / "release-rerun-p1").touch()
        return Outcome(run.finish(), zombie_rows, ids)
    finally:
        run.close()


# DataWritingSparkTask's line once a task of a later stage attempt (.1, .2, ...) handed Spark
# partition 0's commit message.
_RERUN_COMMITTED = re.compile(r"Committed partition 0 \(task \d+, attempt \d+, stage \d+\.[1-9]")


def _wait_for_log(app_id: str, pattern: re.Pattern[str], run: _Run) -> None:
    """Wait until an executor of ``app_id`` logs ``pattern`` (Spark's own executor logs)."""
    logs = Path(SPARK_HOME, "work", app_id)
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while not any(pattern.search(p.read_text(errors="replace")) for p in logs.glob("*/stderr")):
        assert run.process.poll() is None, run.output()[-4000:]
        assert time.monotonic() < deadline, f"no {pattern.pattern!r} in {logs}"
        time.sleep(0.2)


def _committed_values(bootstrap: str, topic: str, expected: int) -> list[str]:
    records = read_all(
        bootstrap, topic, expected=expected, isolation_level="read_committed", timeout_s=30
    )
    return sorted(r.value.decode() for r in records if r.value is not None)


def test_a_zombie_of_the_first_stage_attempt_leaves_the_re_attempt_committed_once(
    bootstrap: str, topic: str, prefix: str, markers: Path
) -> None:
    outcome = _run_scenario(markers, bootstrap, topic, prefix, every_slot_free=False)
    assert "JOB SUCCEEDED" in outcome.output, outcome.output[-4000:]
    # The zombie found slot 0 held open by the re-attempt's prepared transaction.
    assert outcome.ids_before_commit.get(f"{prefix}-0-0") == "Ongoing", outcome
    assert outcome.ids_before_commit.get(f"{prefix}-0-1") == "Ongoing", outcome
    values = _committed_values(bootstrap, topic, ROWS)
    assert values == sorted(f"row-{i}" for i in range(ROWS))  # every row exactly once
    assert_nothing_left_open(bootstrap, topic, prefix, timeout_s=30)


def test_without_the_slot_choice_the_zombie_aborts_the_re_attempts_prepared_transaction(
    bootstrap: str, topic: str, prefix: str, markers: Path
) -> None:
    outcome = _run_scenario(markers, bootstrap, topic, prefix, every_slot_free=True)
    # The driver's check before the first EndTxn finds partition 0's transaction gone.
    failure = "SinkTransactionLostError: exactly-once commit of batch 0 failed before anything"
    assert "JOB FAILED" in outcome.output and failure in outcome.output, outcome.output[-4000:]
    assert "(Spark partitions [0]) are no longer open" in outcome.output
    assert f"{prefix}-0-1" not in outcome.ids_before_commit  # both took slot 0
    values = _committed_values(bootstrap, topic, 0)
    assert values == []
    assert_nothing_left_open(bootstrap, topic, prefix, timeout_s=30)
