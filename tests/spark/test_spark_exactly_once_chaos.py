"""deliveryGuarantee=exactly-once under chaos: a streaming query with a shuffle before the write,
on a ``local-cluster`` of two executor JVMs, against 3 Kafka nodes (min ISR 2), while files of
unique ids are dropped into its input directory and faults strike at seeded random moments:

- ``executor``: SIGKILL of one executor JVM of the running driver (its cluster launches another);
- ``broker``: SIGKILL of one Kafka node, restarted a few seconds later (never two down at once);
- ``driver``: SIGKILL of the driver's process group (with its executors and Python workers), then
  a new run on the same checkpoint, after removing what the kill left of Spark's temporary
  metadata files (``eos_driver.drop_cut_metadata_writes``).

The schedule has at least ``PYKAFKA_CHAOS_MIN_PER_KIND`` (4) faults of each kind and
``PYKAFKA_CHAOS_FAULTS`` (24) in all; the extra ones are executor or broker faults, because a
driver restart costs about a minute on a small machine and the run must stay near its length.
Their moments are uniform over ``PYKAFKA_CHAOS_SECONDS`` (480); a fault whose moment passed while
the previous one was being carried out (a broker restart, a driver start) strikes at once, but
no fault strikes before a batch was committed since the previous one (or ``PROGRESS_WAIT_S``
passed: counted as a stall), so on a slow machine the run stretches rather than only ever
killing queries that are starting. The seed is printed; ``PYKAFKA_CHAOS_SEED`` replays a
schedule (what the processes are doing at each moment still differs from run to run).

Beside the query, on the same cluster and under the same broker faults, two keyed batch jobs
(``chaos_side_jobs.py``), each into its own topic, start at seeded moments (near 25% and 60% of
the schedule, from a generator of their own, so the seed's fault schedule is unchanged): a job
triggered twice at once (``DoubleTrigger``) and a job one of whose transactions is committed
aside and its id moved on while the driver cannot read its marker (``UnreadableMarker``). Each
runs in a thread of its own, so the faults go on meanwhile; they are waited for (bounded) after
the last run.

At the end the input stops growing, the query is stopped and a last ``availableNow`` run on the
checkpoint processes what is left (up to 50 files a micro-batch) and exits 0. Then every id is
read exactly once by a read_committed consumer (kafka-python), no transaction of the query's
prefix is open, the last stable offset equals the log end on every partition, and a summary is
printed: faults by kind, batches committed, driver runs, unplanned driver exits (the query
stopped by itself: each is printed with its log tail), rows, then a line per side job: what its
runs did, and its rows, each read exactly once with nothing of its key's prefix left open. Every
wait is bounded; every process group is killed in ``finally``. ``make chaos`` runs it
(``CHAOS_SEED``, ``CHAOS_SECONDS``). ``PYKAFKA_CHAOS_GUARANTEE=at-least-once`` runs the same chaos
with the weaker guarantee and expects duplicates instead (without the side jobs).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from chaos_side_jobs import DoubleTrigger, SideJob, UnreadableMarker
from eos_driver import Driver, drop_cut_metadata_writes
from sparkutil import assert_nothing_left_open, commit_docs
from standalone import SPARK_HOME

from kafka_sink.testing.local_kafka import LocalKafka
from kafka_sink.testing.oracle import read_all

TopicFactory = Callable[..., str]

SECONDS = float(os.environ.get("PYKAFKA_CHAOS_SECONDS", "480"))
FAULTS = int(os.environ.get("PYKAFKA_CHAOS_FAULTS", "24"))
MIN_PER_KIND = int(os.environ.get("PYKAFKA_CHAOS_MIN_PER_KIND", "4"))
GUARANTEE = os.environ.get("PYKAFKA_CHAOS_GUARANTEE", "exactly-once")
KINDS = ("executor", "broker", "driver")
CHEAP_KINDS = ("executor", "broker")
ROWS_PER_FILE = 100
DROP_EVERY_S = 3.0
# Spark starting executors, a restarted driver reaching its first batch, a node rejoining: on a
# loaded two-core machine each can take minutes, never forever.
EXECUTOR_WAIT_S = 240.0
PROGRESS_WAIT_S = 300.0
BROKER_READY_S = 180.0
LAST_RUN_S = 900.0
# The side jobs start at seeded moments near these fractions of the schedule; each may take
# minutes on a loaded machine, and is waited for (bounded) after the last run.
SIDE_AT = {DoubleTrigger: 0.25, UnreadableMarker: 0.6}
SIDE_WAIT_S = 900.0

# Each wait above is bounded, but their sum (hours) is no useful limit: a run that takes twice its
# schedule plus the last run's bound and 20 minutes is stuck, and fails rather than eat CI's time.
_BOUND_S = 2 * SECONDS + LAST_RUN_S + 1200
pytestmark = [pytest.mark.slow, pytest.mark.timeout(int(_BOUND_S))]


def fault_schedule(rng: random.Random) -> list[tuple[float, str]]:
    """(moment in seconds from the start, kind), in time order."""
    kinds = [kind for kind in KINDS for _ in range(MIN_PER_KIND)]
    kinds += [rng.choice(CHEAP_KINDS) for _ in range(max(0, FAULTS - len(kinds)))]
    rng.shuffle(kinds)
    moments = sorted(rng.uniform(0, SECONDS) for _ in kinds)
    return list(zip(moments, kinds, strict=True))


class InputFiles:
    """Files of consecutive unique ids dropped into ``directory`` every ``DROP_EVERY_S``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.files = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-input", daemon=True)
        directory.mkdir()

    @property
    def rows(self) -> int:
        return self.files * ROWS_PER_FILE

    def start(self) -> None:
        self._drop()  # the first run has a batch to plan at once
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.wait(DROP_EVERY_S):
            self._drop()

    def _drop(self) -> None:
        start = self.files * ROWS_PER_FILE
        # Renamed into place whole: the file source must never list a half-written file.
        tmp = self.directory / f".in{self.files:05d}.tmp"
        tmp.write_text("".join(f"{i}\n" for i in range(start, start + ROWS_PER_FILE)))
        tmp.rename(self.directory / f"in{self.files:05d}.txt")
        self.files += 1


@dataclass
class Chaos:
    """The driver runs of one checkpoint, and what was done to them."""

    args: list[str]
    logs: Path
    checkpoint: Path
    env: dict[str, str]
    rng: random.Random
    run_flags: tuple[str, ...] = ("--trigger=processingTime",)
    driver: Driver | None = None
    runs: int = 0
    done: Counter[str] = field(default_factory=Counter)
    unplanned: list[str] = field(default_factory=list)
    stalls: int = 0
    _batches_at_last_fault: int = 0

    def batches(self) -> int:
        """Micro-batches Spark recorded as done in the checkpoint."""
        return len(list((self.checkpoint / "commits").glob("[0-9]*")))

    def wait_for_progress(self) -> None:
        """Until a batch was committed since the last fault (bounded): faults that strike faster
        than a slow machine lets the query commit would test nothing but its start."""
        deadline = time.monotonic() + PROGRESS_WAIT_S
        while self.batches() <= self._batches_at_last_fault:
            if time.monotonic() > deadline:
                self.stalls += 1
                print(f"no batch committed in {PROGRESS_WAIT_S:.0f} s", flush=True)
                break
            self.running_driver()
            time.sleep(1.0)
        self._batches_at_last_fault = self.batches()

    def start_driver(self) -> Driver:
        drop_cut_metadata_writes(self.checkpoint)
        self.driver = Driver(
            [*self.args, *self.run_flags], self.logs / f"run{self.runs}.log", self.env
        )
        self.runs += 1
        return self.driver

    def running_driver(self) -> Driver:
        """The current run, restarted when it ended by itself (recorded as unplanned)."""
        assert self.driver is not None
        code = self.driver.process.poll()
        if code is not None:
            self.unplanned.append(f"run {self.runs - 1} exited {code}:\n{self.driver.tail()}")
            print(f"UNPLANNED driver exit {code}; restarting", flush=True)
            self.driver.kill()
            self.start_driver()
        return self.driver

    def kill_driver(self) -> None:
        self.running_driver().kill()
        self.start_driver()

    def kill_executor(self) -> None:
        deadline = time.monotonic() + EXECUTOR_WAIT_S
        while not (pids := executor_pids(self.running_driver().process.pid)):
            assert time.monotonic() < deadline, "no executor came up to kill"
            time.sleep(0.5)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.rng.choice(pids), signal.SIGKILL)

    def kill_broker(self, cluster: LocalKafka) -> None:
        node_id = self.rng.choice(cluster.running_node_ids)
        cluster.kill_node(node_id)
        time.sleep(self.rng.uniform(2.0, 8.0))
        cluster.start_node(node_id, wait=False)
        # The next broker fault waits for this node: min ISR 2 of 3 allows one node down.
        cluster.wait_ready(BROKER_READY_S)

    def close(self) -> None:
        # Also when the driver exited by itself: its executors may outlive it in its group.
        if self.driver is not None:
            self.driver.kill()


def executor_pids(driver_pid: int) -> list[int]:
    """The executor JVMs of a local-cluster driver: they stay in its process group."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if os.getpgid(int(entry.name)) != driver_pid:
                continue
            if b"CoarseGrainedExecutorBackend" in (entry / "cmdline").read_bytes():
                pids.append(int(entry.name))
    return pids


@contextlib.contextmanager
def whole_cluster_after(cluster: LocalKafka) -> Iterator[None]:
    try:
        yield
    finally:
        for node_id in cluster.node_ids:
            if node_id not in cluster.running_node_ids:
                cluster.start_node(node_id, wait=False)


def test_streaming_exactly_once_under_chaos(
    kafka_cluster: LocalKafka, cluster_topic_factory: TopicFactory, tmp_path: Path
) -> None:
    seed = int(os.environ.get("PYKAFKA_CHAOS_SEED") or random.randrange(1 << 30))
    print(f"\nchaos seed {seed} (PYKAFKA_CHAOS_SEED={seed} replays it)", flush=True)
    rng = random.Random(seed)
    schedule = fault_schedule(rng)
    bootstrap = kafka_cluster.bootstrap_servers
    topic = cluster_topic_factory(
        partitions=4, replication_factor=3, configs={"min.insync.replicas": "2"}
    )
    prefix = f"eos-chaos-{uuid.uuid4().hex[:8]}"
    inputs = InputFiles(tmp_path / "in")
    checkpoint = tmp_path / "checkpoint"
    logs = tmp_path / "logs"
    logs.mkdir()
    args = [bootstrap, topic, str(inputs.directory), str(checkpoint), GUARANTEE, prefix]
    args += ["--master=local-cluster[2,1,768]", "--shuffle=4", "--max-files=4"]
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME)}
    chaos = Chaos(args, logs, checkpoint, env, rng)
    # Their own generator: the fault schedule and its choices stay what the seed made them.
    side_rng = random.Random(f"{seed}-side")
    side: list[SideJob] = []
    with whole_cluster_after(kafka_cluster):
        try:
            inputs.start()
            chaos.start_driver()
            begun = time.monotonic()
            if GUARANTEE == "exactly-once":
                for kind, at in SIDE_AT.items():
                    side_topic = cluster_topic_factory(
                        partitions=3, replication_factor=3, configs={"min.insync.replicas": "2"}
                    )
                    moment = SECONDS * side_rng.uniform(at - 0.05, at + 0.05)
                    workdir = tmp_path / kind.__name__
                    side.append(
                        kind(bootstrap, side_topic, workdir, env=env, begun=begun, moment=moment)
                    )
                    side[-1].start()
            for moment, kind in schedule:
                while (wait_s := begun + moment - time.monotonic()) > 0:
                    chaos.running_driver()
                    time.sleep(min(wait_s, 1.0))
                chaos.wait_for_progress()
                print(f"{time.monotonic() - begun:7.1f}s {kind} ({chaos.batches()} batches done)")
                if kind == "executor":
                    chaos.kill_executor()
                elif kind == "broker":
                    chaos.kill_broker(kafka_cluster)
                else:
                    chaos.kill_driver()
                chaos.done[kind] += 1
            inputs.stop()
            chaos.close()
            # Larger micro-batches: the backlog left by the faults is drained in bounded time.
            chaos.run_flags = ("--trigger=availableNow", "--max-files=50")
            last = chaos.start_driver()
            code = last.finish(LAST_RUN_S)
            assert code == 0, f"the last run failed (seed {seed}):\n{last.tail()}"
            for job in side:
                job.close(max(0.0, begun + SIDE_WAIT_S + job.moment - time.monotonic()))
        finally:
            inputs.stop()
            chaos.close()
            for job in side:
                job.close(0)

    total = inputs.rows
    committed = read_all(
        bootstrap, topic, expected=total, timeout_s=180, isolation_level="read_committed"
    )
    counts = Counter(int(r.value) for r in committed)
    lost = set(range(total)) - set(counts)
    duplicated = sorted(i for i, c in counts.items() if c > 1)
    docs = commit_docs(checkpoint / "pykafka-commits", "[0-9]*.json")
    batches = len({d["batch_id"] for d in docs if "failed_tasks" not in d})
    print(
        f"chaos summary (seed {seed}): faults {dict(chaos.done)}, batches committed {batches}, "
        f"driver runs {chaos.runs}, unplanned driver exits {len(chaos.unplanned)}, "
        f"faults that waited {PROGRESS_WAIT_S:.0f} s for a batch in vain {chaos.stalls}, "
        f"rows {total} in {inputs.files} files, read {len(committed)}",
        flush=True,
    )
    for exit_report in chaos.unplanned:
        print(exit_report, flush=True)
    side_failures: list[AssertionError] = []
    for job in side:
        try:
            line = job.check()
        except AssertionError as exc:
            side_failures.append(exc)
            line = f"{job.label}: FAILED: {job.outcome()}"
        print(f"chaos summary (seed {seed}): {line}", flush=True)
    assert not lost, f"{len(lost)} rows lost, e.g. {sorted(lost)[:10]} (seed {seed})"
    if GUARANTEE == "at-least-once":
        assert duplicated, f"no duplicates under at-least-once (seed {seed})"
        return
    assert not duplicated, f"{len(duplicated)} rows read twice: {duplicated[:10]} (seed {seed})"
    assert sum(chaos.done.values()) >= min(FAULTS, len(KINDS) * MIN_PER_KIND)
    assert all(chaos.done[kind] >= MIN_PER_KIND for kind in KINDS), chaos.done
    assert_nothing_left_open(bootstrap, topic, prefix)
    if side_failures:
        raise side_failures[0]
