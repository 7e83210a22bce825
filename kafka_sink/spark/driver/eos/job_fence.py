"""A batch job's fence on its prefix: the newest write of a prefix fences every earlier one.

Role: two runs of one ``idempotencyKey`` at the same time (an orchestrator that triggers a job
twice) must not both write; nor may two batch jobs given the same ``transactionalIdPrefix``
(with a key or without), since the commit of each sweeps the prefix and would abort the other's
prepared transactions. Each such job's planning takes the fence of its prefix (``fence.py``: the
id ``<prefix>.fence``) with a new InitProducerId, after refusing a prefix another write claimed
(``claims.py``); the job's plan carries the token (``EosPlan.fence_token``) to its commit, which
writes the intent store through it and never takes the fence again. An earlier job that a later
one fenced is refused by Kafka at its next intent-store write and ends no transaction
(``EosCommitter`` checks the fence before any sweep or abort), and :class:`JobFence` gives its
error: another run of the key, or another write given the prefix, took it over. Its commit so
fails before anything of it is visible, and its transactions are ended by its own abort (by
their exact producer id and epoch) or by the newer write's sweep. ``idempotency.py`` plans a
keyed run, ``datasource.py`` a job without a key; ``committer.for_plan`` builds the fence
through :func:`job_fence`.

Claims. A keyed job claims its prefix for its key once it holds the fence (``claims.py``): every
run of the key has that key, so the claim never locks the key out. A job without a key only
checks the claim and takes none: its one owner would be its write id, new for each job, so the
claim of a job that was killed (which nothing releases) would refuse every later write of the
prefix until released by hand. Such a job is protected by the fence instead: the newest write
of the prefix wins, and a streaming query or keyed job that claims the prefix later fences it
the same way.

Each write through the fence moves the token on (Transactions V2: the epoch; V1: the
sequence), and Spark builds the run's ``abort()`` (after a commit that failed past its intent)
from the planning's plan again. So every write hands the run's token over (:func:`hand_over`:
a file in the driver's Spark local directory, keyed by the run's take id) and every committer
of the run starts from the newest one handed over (:func:`handed_over`): the abort finishes the
commit the intent recorded, and its done record is appended at the sequence that follows (a
stale V1 sequence would be taken by the leader for a retry, and dropped).

Invariants:
- A job takes the fence once, while planning; its commit and abort use the planning's token or
  a later one of the same take, so they never fence a later write of the prefix.
- The token travels in the job's plan, and its later states under the job's own take id: a
  later job of the prefix on the same driver takes a fence (and a take id) of its own. A token
  handed over is used only for the plan's producer id, at an epoch and sequence not below the
  plan's.
- Residual: the newer write's sweep runs after its own tasks. An earlier job fenced only after
  its intent landed (it had reached its commit before the newer write was planned) commits what
  its intent names; a newer job without a key cannot read that intent (it is keyed by the
  earlier job's write id), so its sweep could abort what the earlier commit had not reached if
  the earlier driver stalled between its intent and its EndTxns for longer than the whole newer
  job took to plan and run its tasks. The earlier job then reports the lost transactions.
- Standard library, the fence and the plan only at import.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import TYPE_CHECKING

from kafka_sink.sink_errors import SinkFencedError
from kafka_sink.spark.driver.eos.fence import DriverFence, FenceToken, fence_id
from kafka_sink.spark.eos_plan import EosPlan

if TYPE_CHECKING:
    from kafka_sink.admin.transactions import TransactionListing

__all__ = ["JobFence", "hand_over", "handed_over", "job_fence"]

# Runs' fences handed over in this process (by take id), when there is no Spark local directory.
_HANDED: dict[str, FenceToken] = {}


class JobFence(DriverFence):
    """One job's hold on its prefix: the prefix's fence, which the planning of every keyed run
    and of every job given the prefix takes, so that the newest of them fences the others."""

    def __init__(
        self,
        idempotency_key: str | None,
        prefix: str,
        query_key: str,
        token: FenceToken,
        *,
        describe: Callable[[str], TransactionListing | None],
    ) -> None:
        super().__init__(prefix, query_key, token, describe=describe)
        #: None for a job without ``idempotencyKey`` (given ``transactionalIdPrefix``).
        self.idempotency_key = idempotency_key

    def advance(self, token: FenceToken) -> None:
        # Handed to this job's later committers (its abort after a failed commit), keyed by
        # this job's take: a later job of the prefix on the same driver takes a fence of its own.
        self._token = replace(token, taken=self._token.taken)
        hand_over(self._token)

    def error(self, doing: str, why: object) -> SinkFencedError:
        if self.idempotency_key is None:
            return SinkFencedError(
                f"exactly-once: another write with transactionalIdPrefix {self.prefix!r} (a "
                "batch job, or a streaming query) started while this job was "
                f"{doing}, and took the prefix over ({why}). Two writes sharing a prefix would "
                "abort each other's transactions, so this job commits nothing more and fails: "
                "nothing of it was made visible unless its commit had been recorded before the "
                "other write started, and its open transactions are aborted. Fix: give each "
                "write its own transactionalIdPrefix (or leave the option out: a job then gets "
                "a prefix of its own), or run jobs of one prefix one at a time; then run this "
                "job again"
            )
        return SinkFencedError(
            f"exactly-once: another run of idempotencyKey {self.idempotency_key!r} (prefix "
            f"{self.prefix!r}) started while this run was {doing}, and took the key over "
            f"({why}). Two runs of one key must not both write, so this run commits nothing "
            "more and fails; the other run writes the job's rows once (finishing this run's "
            "commit if this run had recorded it) and aborts this run's open transactions. Fix: "
            "let the other run finish and check its outcome (a run of the key after it writes "
            "nothing); have the orchestrator start one run of a key at a time. Another write "
            "given "
            f"transactionalIdPrefix {self.prefix!r} fences a run the same way: give it its own"
        )


def job_fence(
    plan: EosPlan,
    *,
    init: Callable[[str], tuple[int, int]],
    describe: Callable[[str], TransactionListing | None],
    before_acquire: Callable[[], None],
) -> JobFence:
    """A batch job's fence: the one its planning took (``plan.fence_token``, in the commit),
    else, while planning, a new InitProducerId on the prefix's fence id after
    ``before_acquire`` (which refuses a prefix another write claimed)."""
    token = plan.fence_token
    if token is None:
        before_acquire()
        producer_id, epoch = init(fence_id(plan.prefix))
        token = FenceToken(fence_id(plan.prefix), producer_id, epoch, taken=uuid.uuid4().hex)
    else:
        token = handed_over(token)
    return JobFence(plan.idempotency_key, plan.prefix, plan.query_key, token, describe=describe)


def hand_over(token: FenceToken) -> None:
    """Keep ``token`` (a run's fence after a write through it) where the run's next committer
    on this driver finds it: the driver's Spark local directory, else this process."""
    if not token.taken:
        return
    path = _path(token.taken)
    if path is None:
        _HANDED[token.taken] = token
        return
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(asdict(token), f)
    os.replace(tmp, path)


def handed_over(token: FenceToken) -> FenceToken:
    """The run's fence as its last write through it left it (``token``, the planning's, when no
    write went through it since, or the write was on another driver)."""
    if not token.taken:
        return token
    path = _path(token.taken)
    if path is None:
        found = _HANDED.get(token.taken)
    else:
        try:
            with open(path, encoding="utf-8") as f:
                found = FenceToken(**json.load(f))
        except (FileNotFoundError, ValueError, TypeError):
            found = None
    if (
        found is None
        or (found.transactional_id, found.producer_id)
        != (token.transactional_id, token.producer_id)
        or (found.producer_epoch, found.sequence) < (token.producer_epoch, token.sequence)
    ):
        return token
    return found


def _path(taken: str) -> str | None:
    local_dir = os.environ.get("SPARK_LOCAL_DIRS", "").split(",")[0]
    if not local_dir or not os.path.isdir(local_dir):
        return None
    digest = hashlib.sha256(taken.encode()).hexdigest()[:16]
    return os.path.join(local_dir, f"pykafka-job-fence-{digest}.json")
