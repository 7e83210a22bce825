"""Keyed batch jobs run beside the exactly-once chaos run (``test_spark_exactly_once_chaos.py``):
on its cluster, while its broker faults strike, each into a topic of its own, each driver a
process of its own (``idempotent_job_child.py``, ``local[1]``: the machine's cores belong to the
chaos run's query).

- :class:`DoubleTrigger`: an orchestrator triggers a job twice. Two drivers with one
  ``idempotencyKey`` start together and hold before their intents until both got there (or one
  ended), so their commits overlap. Each either prints ``DONE`` (it planned after the other
  completed and wrote nothing, or it was first) or fails saying another run of the key took it
  over; a broker fault may fail one for another reason, which is reported. Until a run printed
  ``DONE`` the key is run again (at most :data:`RERUNS` times).
- :class:`UnreadableMarker`: a job's driver pauses once its intent is durable (``fault_hooks``,
  point ``committing``); meanwhile the harness makes markers unreadable to the driver (the hook's
  ``marker-unreadable`` file), commits one of the job's transactions with an EndTxn of its own
  (the driver's first EndTxn, applied, its answer lost) and moves its id on with InitProducerId
  (a stale task attempt would), then resumes the driver. Its EndTxn for that transaction is
  refused and the marker cannot be read: the job fails with ``SinkCommitOutcomeUnknownError``
  and the intent stays, nothing recorded lost. The file removed, the key is run again until a
  run prints ``DONE``: it finishes the recorded commit and writes nothing new.

Each scenario is a thread started at its moment of the chaos run, so the fault schedule goes on
meanwhile; :meth:`SideJob.check` (after the chaos) reads its topic with a read_committed
consumer (kafka-python): every row exactly once, no transaction of the key's prefix open. Every
wait is bounded; :meth:`SideJob.close` kills every driver's process group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from sparkutil import assert_nothing_left_open

from kafka_sink.prepared import PreparedTransaction
from kafka_sink.spark.driver.eos.intents import BatchRecord
from kafka_sink.testing.oracle import read_all
from tests.txn_children import INIT_TRANSACTIONS

T = TypeVar("T")

CHILD = str(Path(__file__).with_name("idempotent_job_child.py"))
ROWS = 3000
MASTER = "local[1]"
RERUNS = 4
# A run of a few thousand rows on a loaded two-core machine, a broker restart in it: minutes.
RUN_WAIT_S = 420.0
PAUSE_WAIT_S = 300.0
STAGE_WAIT_S = 90.0
PAUSED_BEFORE_INTENT = "paused-0-before-intent"


class Run:
    """One driver of a side job, in its own process group."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str]) -> None:
        self.log = log
        with open(log, "w", encoding="utf-8") as out:
            self.process = subprocess.Popen(
                [sys.executable, CHILD, *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )

    def text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def done(self) -> bool:
        return "DONE" in self.text()

    def ended(self) -> bool:
        return self.process.poll() is not None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(30)

    def why(self) -> str:
        """The last error line of the run's output (its failure, for the summary)."""
        lines = [line.strip() for line in self.text().splitlines() if "Error" in line]
        return lines[-1][:300] if lines else "no error line"

    def tail(self) -> str:
        lines = self.text().splitlines()
        return "\n".join([line for line in lines if not line.lstrip().startswith("at ")][-40:])


class SideJob(threading.Thread):
    """One scenario: a key, a topic, its drivers; started at ``moment`` of the chaos run."""

    label = "side job"

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        workdir: Path,
        *,
        env: dict[str, str],
        begun: float,
        moment: float,
    ) -> None:
        super().__init__(name=f"chaos-{type(self).__name__}", daemon=True)
        self.bootstrap = bootstrap
        self.topic = topic
        self.workdir = workdir
        self.env = env
        self.begun = begun
        self.moment = moment
        tag = uuid.uuid4().hex[:8]
        self.key = f"chaos-{tag}"
        self.intent_topic = f"chaos-intents-{tag}"
        self.runs: list[Run] = []
        self.reruns: list[Run] = []
        self.failure: BaseException | None = None
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self._halt = threading.Event()
        workdir.mkdir()

    @property
    def prefix(self) -> str:
        from kafka_sink.spark.driver.eos.idempotency import job_identity

        return job_identity(self.key, topic=self.topic, prefix=None).prefix

    def run(self) -> None:
        if self._halt.wait(max(0.0, self.begun + self.moment - time.monotonic())):
            return
        self.started_at = time.monotonic() - self.begun
        print(f"{self.started_at:7.1f}s {self.label} starts (key {self.key})", flush=True)
        try:
            self.scenario()
        except BaseException as exc:  # reported by check(), in the test's thread
            self.failure = exc
        finally:
            self.ended_at = time.monotonic() - self.begun
            for run in self.runs:
                run.kill()
            print(f"{self.ended_at:7.1f}s {self.label} ended", flush=True)

    def scenario(self) -> None:
        raise NotImplementedError

    def close(self, timeout_s: float) -> None:
        """Wait (bounded) for the scenario to end, then kill what is left of its drivers."""
        self.join(timeout_s)
        self._halt.set()
        for run in self.runs:
            run.kill()
        self.join(60)

    def start_run(self, pause_dir: Path | None = None) -> Run:
        args = [
            self.bootstrap,
            self.topic,
            str(ROWS),
            self.key,
            "-",
            self.intent_topic,
            str(self.workdir / "commit-log"),
            MASTER,
        ]
        env = dict(self.env)
        if pause_dir is not None:
            env["PYKAFKA_TEST_COMMIT_PAUSE_DIR"] = str(pause_dir)
        run = Run(args, self.workdir / f"run{len(self.runs)}.log", env)
        self.runs.append(run)
        return run

    def pause_dir(self) -> Path:
        directory = self.workdir / f"pause{len(self.runs)}"
        directory.mkdir()
        return directory

    def finish(self, run: Run) -> None:
        """Until ``run`` ended (bounded: killed after :data:`RUN_WAIT_S`)."""
        self._until(run.ended, RUN_WAIT_S)
        run.kill()

    def rerun_until_done(self, pause_dir: Path | None = None) -> None:
        """The key run again, as an orchestrator retries a failed job, until a run succeeds."""
        for _ in range(RERUNS):
            run = self.start_run(pause_dir)
            self.reruns.append(run)
            self.finish(run)
            if run.done():
                return

    def _until(self, check: Callable[[], bool], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not check():
            if time.monotonic() > deadline or self._halt.wait(0.2):
                return False
        return True

    def check(self) -> str:
        """Assert the scenario's outcome and every row of its topic read exactly once; its
        line of the chaos summary."""
        assert self.started_at is not None, f"{self.label} never started"
        assert not self.is_alive(), f"{self.label} did not end"
        if self.failure is not None:
            raise AssertionError(f"{self.label} failed: {self.failure!r}") from self.failure
        records = read_all(
            self.bootstrap,
            self.topic,
            expected=ROWS,
            timeout_s=180,
            isolation_level="read_committed",
        )
        counts = Counter(int(r.value) for r in records)
        lost = set(range(ROWS)) - set(counts)
        twice = sorted(i for i, c in counts.items() if c > 1)
        assert not lost, f"{self.label}: {len(lost)} rows lost, e.g. {sorted(lost)[:10]}"
        assert not twice, f"{self.label}: {len(twice)} rows read twice, e.g. {twice[:10]}"
        assert_nothing_left_open(self.bootstrap, self.topic, self.prefix)
        return (
            f"{self.label} ({self.started_at:.0f}-{self.ended_at:.0f} s): {self.outcome()}; "
            f"rows {ROWS}, read {len(records)}"
        )

    def outcome(self) -> str:
        raise NotImplementedError

    def reruns_said(self) -> str:
        said = ["DONE" if r.done() else f"failed ({r.why()})" for r in self.reruns]
        return f"re-runs {said}"


class DoubleTrigger(SideJob):
    label = "double-triggered keyed job"

    def scenario(self) -> None:
        pairs = []
        for _ in range(2):
            pause_dir = self.pause_dir()
            (pause_dir / "pause-0-before-intent").touch()
            (pause_dir / "resume-0").touch()  # the commit's own pause is not asked for
            pairs.append((self.start_run(pause_dir), pause_dir))
        self._until(
            lambda: all(r.ended() or (d / PAUSED_BEFORE_INTENT).exists() for r, d in pairs),
            PAUSE_WAIT_S,
        )
        for _, pause_dir in pairs:
            (pause_dir / "resume-0-before-intent").touch()
        for run, _ in pairs:
            self.finish(run)
        if not any(run.done() for run, _ in pairs):
            self.rerun_until_done()

    def verdict(self, run: Run) -> str:
        if run.done():
            return "DONE"
        if f"another run of idempotencyKey {self.key!r}" in run.text():
            return "fenced by the other run"
        return f"failed otherwise ({run.why()})"

    def check(self) -> str:
        line = super().check()
        first = self.runs[:2]
        assert len(first) == 2, f"{self.label}: {len(first)} runs"
        verdicts = [self.verdict(run) for run in first]
        assert any(r.done() for r in self.runs), f"{self.label}: no run succeeded: {verdicts}\n" + (
            "\n".join(r.tail() for r in self.runs)
        )
        if all(r.done() for r in first):
            # Both succeeded: one of them found the key completed and wrote nothing.
            said = f"idempotencyKey {self.key!r} was already completed by write"
            assert any(said in r.text() for r in first), "\n".join(r.tail() for r in first)
        return line

    def outcome(self) -> str:
        return f"the two runs: {[self.verdict(r) for r in self.runs[:2]]}, {self.reruns_said()}"


class UnreadableMarker(SideJob):
    label = "keyed job with an unreadable marker"

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        workdir: Path,
        *,
        env: dict[str, str],
        begun: float,
        moment: float,
    ) -> None:
        super().__init__(bootstrap, topic, workdir, env=env, begun=begun, moment=moment)
        self.victim: str | None = None
        self.paused: Run | None = None
        self.before_pause: list[Run] = []
        self.recorded: str | None = None

    def scenario(self) -> None:
        from tests.fault_site.fault_env import MARKER_UNREADABLE

        pause_dir = self.workdir / "pause"
        pause_dir.mkdir()
        paused = pause_dir / "paused-0"
        for _ in range(RERUNS):
            run = self.start_run(pause_dir)
            self._until(lambda r=run: r.ended() or paused.exists(), PAUSE_WAIT_S)
            if paused.exists() and not run.ended():
                self.paused = run
                break
            # Ended (or stuck) before its intent was durable: a broker fault; the key again.
            self.before_pause.append(run)
            self.finish(run)
        if self.paused is None:
            return
        marker = pause_dir / MARKER_UNREADABLE
        try:
            marker.touch()
            self.victim = self._commit_one_and_move_its_id_on()
        finally:
            (pause_dir / "resume-0").touch()
        self.finish(self.paused)
        self.recorded = self._recorded_state()
        marker.unlink()
        self.rerun_until_done(pause_dir)

    def _commit_one_and_move_its_id_on(self) -> str:
        from kafka_sink.admin.transactions import complete_transaction, list_transactions

        config = {"bootstrap.servers": self.bootstrap}

        def one_of_the_job_s() -> PreparedTransaction:
            listing = list_transactions(config, self.prefix, timeout=30)
            return min(
                (
                    t
                    for t in listing
                    if t.state == "Ongoing" and any(tp[0] == self.topic for tp in t.partitions)
                ),
                key=lambda t: t.transactional_id,
            ).prepared()

        # A broker fault may refuse a step: each is retried (bounded), and each may be repeated.
        victim = self._retried(one_of_the_job_s)
        self._retried(lambda: complete_transaction(config, victim, commit=True, timeout=30))
        self._retried(
            lambda: subprocess.run(
                [sys.executable, "-c", INIT_TRANSACTIONS, self.bootstrap, victim.transactional_id],
                check=True,
                timeout=60,
                capture_output=True,
            )
        )
        return victim.transactional_id

    def _retried(self, step: Callable[[], T]) -> T:
        deadline = time.monotonic() + STAGE_WAIT_S
        while True:
            try:
                return step()
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(2.0)

    def _recorded_state(self) -> str:
        """The key's last record in its intent store: ``intent`` (``lost`` if it names any)."""
        from kafka_sink.spark.driver.eos.idempotency import job_identity
        from kafka_sink.spark.driver.eos.kafka_intents import KafkaIntentStore

        def last() -> BatchRecord | None:
            config = {"bootstrap.servers": self.bootstrap}
            store = KafkaIntentStore.open(config, self.intent_topic)
            try:
                return store.last(job_identity(self.key, topic=self.topic, prefix=None).query_key)
            finally:
                store.close()

        record = self._retried(last)
        if record is None:
            return "none"
        return f"{record.state} lost" if "lost" in record.extra else record.state

    def check(self) -> str:
        line = super().check()
        logs = "\n".join(r.tail() for r in self.runs)
        assert self.paused is not None, f"{self.label}: no run reached its commit:\n{logs}"
        assert self.victim is not None and self.victim.startswith(self.prefix), self.victim
        text = self.paused.text()
        assert self.paused.process.returncode != 0 and not self.paused.done(), text[-3000:]
        assert "SinkCommitOutcomeUnknownError" in text and repr(self.victim) in text, text[-3000:]
        assert "Nothing is recorded lost" in text and "fault hook" in text, text[-3000:]
        assert self.recorded == "intent", f"{self.label}: the key's record is {self.recorded}"
        assert self.reruns and self.reruns[-1].done(), f"{self.label}: no re-run succeeded:\n{logs}"
        finished = "finished the recorded commit of batch 0"
        assert any(finished in r.text() for r in self.reruns), logs
        return line

    def outcome(self) -> str:
        paused = self.paused
        first = "never paused" if paused is None else ("DONE" if paused.done() else paused.why())
        if paused is not None and "SinkCommitOutcomeUnknownError" in paused.text():
            first = "failed with SinkCommitOutcomeUnknownError"
        return (
            f"{len(self.before_pause)} run(s) failed before the intent, transaction "
            f"{self.victim} committed aside and its id moved on, the paused run: {first}, "
            f"record left: {self.recorded}, {self.reruns_said()}"
        )
