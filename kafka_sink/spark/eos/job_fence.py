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

Invariants:
- A job takes the fence once, while planning; its commit uses the planning's token, so it never
  fences a later write of the prefix.
- The token lives in the job's plan, never on the driver's disk: a later job of the prefix on
  the same driver takes a fence of its own.
- Residual: the newer write's sweep runs after its own tasks. An earlier job fenced only after
  its intent landed (it had reached its commit before the newer write was planned) commits what
  its intent names; a newer job without a key cannot read that intent (it is keyed by the
  earlier job's write id), so its sweep could abort what the earlier commit had not reached if
  the earlier driver stalled between its intent and its EndTxns for longer than the whole newer
  job took to plan and run its tasks. The earlier job then reports the lost transactions.
- Standard library, the fence and the plan only at import.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kafka_sink.spark.eos.fence import DriverFence, FenceToken, SinkFencedError, fence_id
from kafka_sink.spark.eos.plan import EosPlan

if TYPE_CHECKING:
    from kafka_sink.admin.transactions import TransactionListing

__all__ = ["JobFence", "job_fence"]


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
        # Kept in this job's plan (EosPlan.fence_token), not on the driver's disk, where a
        # later job of the prefix on the same driver would take it for its own.
        self._token = token

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
        token = FenceToken(fence_id(plan.prefix), producer_id, epoch)
    return JobFence(plan.idempotency_key, plan.prefix, plan.query_key, token, describe=describe)
