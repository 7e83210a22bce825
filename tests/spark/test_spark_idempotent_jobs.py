"""A batch job with ``idempotencyKey`` re-run after a failure at each step of its commit: real
Spark (each run a driver process of its own, ``idempotent_job_child.py``), a real broker, an
independent read_committed consumer (kafka-python).

The first run is SIGKILLed at a pause of its commit (``fault_hooks``): before the intent (the
tasks' transactions prepared and open), after it (before any EndTxn), between two EndTxns (the
test commits one of the recorded transactions itself, as a driver dying after its first EndTxn
would have), after done; or it succeeds. A second run with the same key then ends with every row
read exactly once and no transaction left open (last stable offset at the log end), and its log
says what it found. Without the key, the same kill after done and re-run shows every row twice.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from sparkutil import assert_nothing_left_open, commit_docs

from kafka_sink.testing.oracle import create_topic, read_all

CHILD = str(Path(__file__).with_name("idempotent_job_child.py"))
ROWS = 3000
PARTITIONS = 3
# The pause file of each step (fault_hooks); "after-intent" is the commit's own pause.
PAUSED = {
    "before-intent": "paused-0-before-intent",
    "after-intent": "paused-0",
    "between-end-txns": "paused-0",
    "after-done": "paused-0-after-done",
}
ASK = {"before-intent": "pause-0-before-intent", "after-done": "pause-0-after-done"}


class _Job:
    """The names one test's runs share."""

    def __init__(self, bootstrap: str, tmp_path: Path, key: str | None) -> None:
        self.bootstrap = bootstrap
        self.tmp_path = tmp_path
        self.key = key
        tag = uuid.uuid4().hex[:8]
        self.topic = f"idem-{tag}"
        self.intent_topic = f"idem-intents-{tag}"
        self.explicit_prefix = f"idem-{tag}"
        self.runs = 0
        create_topic(bootstrap, self.topic, partitions=PARTITIONS)

    @property
    def prefix(self) -> str:
        from kafka_sink.spark.driver.eos.idempotency import job_identity

        if self.key is None:
            return self.explicit_prefix
        return job_identity(self.key, topic=self.topic, prefix=None).prefix

    def run(
        self, kill_at: str | None = None, while_paused: Callable[[], None] = lambda: None
    ) -> str:
        """One run of the job; its output. With ``kill_at``, SIGKILLed at that pause."""
        self.runs += 1
        pause_dir = self.tmp_path / f"pause{self.runs}"
        pause_dir.mkdir()
        if kill_at in ASK:
            (pause_dir / ASK[kill_at]).touch()
            (pause_dir / "resume-0").touch()  # the commit's own pause, not the one asked for
        log = self.tmp_path / f"run{self.runs}.log"
        env = dict(os.environ)
        if kill_at is not None:
            env["PYKAFKA_TEST_COMMIT_PAUSE_DIR"] = str(pause_dir)
        args = [
            self.bootstrap,
            self.topic,
            str(ROWS),
            self.key or "-",
            self.explicit_prefix,
            self.intent_topic,
            str(self.tmp_path / "log"),
        ]
        with open(log, "w", encoding="utf-8") as out:
            child = subprocess.Popen(
                [sys.executable, CHILD, *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
            try:
                if kill_at is not None:
                    _wait_for(pause_dir / PAUSED[kill_at], child, log)
                    while_paused()
                    os.killpg(child.pid, signal.SIGKILL)
                child.wait(timeout=300)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
        text = log.read_text(encoding="utf-8", errors="replace")
        assert ("DONE" in text) == (kill_at is None), text[-3000:]
        return text

    def start(self, *, pause_before_intent: bool) -> tuple[subprocess.Popen[bytes], Path, Path]:
        """A run started and left running: its process, log and pause directory."""
        self.runs += 1
        pause_dir = self.tmp_path / f"pause{self.runs}"
        pause_dir.mkdir()
        if pause_before_intent:
            (pause_dir / ASK["before-intent"]).touch()
        log = self.tmp_path / f"run{self.runs}.log"
        env = dict(os.environ)
        env["PYKAFKA_TEST_COMMIT_PAUSE_DIR"] = str(pause_dir)
        args = [
            self.bootstrap,
            self.topic,
            str(ROWS),
            self.key or "-",
            self.explicit_prefix,
            self.intent_topic,
            str(self.tmp_path / "log"),
        ]
        with open(log, "w", encoding="utf-8") as out:
            child = subprocess.Popen(
                [sys.executable, CHILD, *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        return child, log, pause_dir

    def commit_one_recorded_transaction(self) -> None:
        """What a driver that died after its first EndTxn leaves: one of them committed."""
        from kafka_sink.admin.transactions import TransactionAdmin
        from kafka_sink.spark.driver.eos.idempotency import job_identity
        from kafka_sink.spark.driver.eos.kafka_intents import KafkaIntentStore

        assert self.key is not None
        config = {"bootstrap.servers": self.bootstrap}
        store = KafkaIntentStore.open(config, self.intent_topic)
        try:
            identity = job_identity(self.key, topic=self.topic, prefix=None)
            record = store.last(identity.query_key)
        finally:
            store.close()
        assert record is not None and record.state == "intent" and record.transactions
        admin = TransactionAdmin(config)
        try:
            admin.complete(record.transactions[0], True)
        finally:
            admin.close()

    def counts(self, expected: int = ROWS) -> Counter[int]:
        records = read_all(
            self.bootstrap, self.topic, expected=expected, isolation_level="read_committed"
        )
        return Counter(int(r.value) for r in records)

    def assert_exactly_once(self) -> None:
        counts = self.counts()
        assert set(counts) == set(range(ROWS))
        assert all(c == 1 for c in counts.values()), "rows read twice by read_committed"
        assert_nothing_left_open(self.bootstrap, self.topic, self.prefix)


def _wait_for(path: Path, child: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 240
    while not path.exists():
        assert child.poll() is None, log.read_text(encoding="utf-8", errors="replace")[-3000:]
        assert time.monotonic() < deadline, f"the job never reached {path.name}"
        time.sleep(0.2)


def _rerun_writes_once(job: _Job, step: str | None) -> str:
    job.run(
        kill_at=step,
        while_paused=job.commit_one_recorded_transaction
        if step == "between-end-txns"
        else lambda: None,
    )
    second = job.run()
    job.assert_exactly_once()
    return second


@pytest.mark.slow
def test_a_keyed_job_killed_between_two_end_txns_and_re_run_writes_every_row_once(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    job = _Job(kafka_bootstrap, tmp_path, key=f"nightly-{uuid.uuid4().hex[:6]}")
    second = _rerun_writes_once(job, "between-end-txns")
    assert "finished the recorded commit of batch 0" in second
    assert f"idempotencyKey '{job.key}' was already completed by write" in second
    [doc] = [d for d in commit_docs(tmp_path / "log") if "already_completed" in d]
    assert doc["idempotency_key"] == job.key and doc["record_count"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("step", ["before-intent", "after-intent", "after-done", None])
def test_a_keyed_job_failed_at_any_step_or_done_and_re_run_writes_every_row_once(
    kafka_bootstrap: str, tmp_path: Path, step: str | None
) -> None:
    job = _Job(kafka_bootstrap, tmp_path, key=f"nightly-{uuid.uuid4().hex[:6]}")
    second = _rerun_writes_once(job, step)
    if step == "before-intent":
        # The killed run's prepared transactions were aborted before the re-run's tasks ran.
        assert "aborted 3 open transaction(s) of prefix" in second
        assert "already completed" not in second
    else:
        assert f"idempotencyKey '{job.key}' was already completed by write" in second


@pytest.mark.slow
def test_without_the_key_a_job_killed_after_done_and_re_run_writes_every_row_twice(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    job = _Job(kafka_bootstrap, tmp_path, key=None)
    job.run(kill_at="after-done")
    job.run()
    counts = job.counts(expected=2 * ROWS)
    assert set(counts) == set(range(ROWS)) and set(counts.values()) == {2}


@pytest.mark.slow
def test_two_runs_of_one_key_started_together_write_every_row_once(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """An orchestrator triggers the job twice: two drivers, started together. Each holds before
    its intent until both have got there (or one ended), then both go on at once, so that their
    commits overlap: every row is read once, one run succeeds and the other fails saying another
    run of the key took it over (or finds the key completed, having written nothing)."""
    job = _Job(kafka_bootstrap, tmp_path, key=f"nightly-{uuid.uuid4().hex[:6]}")
    runs = [job.start(pause_before_intent=True) for _ in range(2)]
    try:
        deadline = time.monotonic() + 240
        paused = "paused-0-before-intent"
        while not all(c.poll() is not None or (d / paused).exists() for c, _, d in runs):
            assert time.monotonic() < deadline, "the runs never reached their intent"
            time.sleep(0.2)
        for _, _, pause_dir in runs:
            (pause_dir / "resume-0-before-intent").touch()
        for child, _, _ in runs:
            child.wait(timeout=300)
    finally:
        for child, _, _ in runs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
    texts = [log.read_text(encoding="utf-8", errors="replace") for _, log, _ in runs]
    job.assert_exactly_once()
    succeeded = [t for t in texts if "DONE" in t]
    failed = [t for t in texts if "DONE" not in t]
    assert succeeded, texts[0][-3000:] + texts[1][-3000:]
    if not failed:
        # Both succeeded: one of them found the key completed and wrote nothing.
        assert any(f"idempotencyKey '{job.key}' was already completed by write" in t for t in texts)
    for text in failed:
        assert f"another run of idempotencyKey '{job.key}'" in text, text[-3000:]
