"""The exactly-once intent store on a compacted Kafka topic (``intentStore=kafka``, the default).

Role: an :class:`~kafka_sink.spark.driver.eos.intents.IntentStore` whose records live in a topic of
the cluster the sink writes to (default ``pykafka-commit-intents``), so a driver restarted on
another host (with a checkpoint in an object store) finds the intent its predecessor recorded.
The sink already has the cluster's address and credentials; no other service is involved.

Layout: one record per :class:`BatchRecord` step, key = the query key (streaming query id) in
UTF-8, value = the record as JSON (``format`` 1), compressed with zstd. Every record goes to
partition 0, whatever the topic's partition count (no key hashing: adding partitions to the topic
never moves a query's records elsewhere), so the latest record of a key in partition 0 is its
current state and compaction keeps exactly that one.

The topic, when missing, is created with ``cleanup.policy=compact``, 1 partition, replication
``min(3, brokers)`` and ``min.insync.replicas`` ``min(2, replication)``, and segments rolled every
10 minutes so the cleaner can keep it small. Whether created here or found, the topic is then
checked (once per process and cluster) and refused, naming the topic, the values found and the
fix, when:

- its ``cleanup.policy`` is not exactly ``compact`` (``delete``, alone or with ``compact``, drops
  the state of a query idle for longer than ``retention.ms``);
- the cluster has two brokers or more and partition 0 has fewer than 2 replicas or the topic's
  ``min.insync.replicas`` is below 2: an intent acknowledged with ``acks=all`` could then live on
  one broker only, and be lost with it.

On a 1-broker cluster nothing can be replicated: the topic is accepted and a warning is logged
once per process.

Fencing: a streaming query's store is opened with its driver's
:class:`~kafka_sink.spark.driver.eos.fence.DriverFence`, and every
write (intent, done, lost records,
deletes, claims) is then a transaction of its own on the fence id
(``TopicLog.append_transactional``): a driver another one fenced is refused by Kafka and gets
:class:`~kafka_sink.spark.driver.eos.fence.SinkFencedError`, and what it had in flight is aborted by
the newer driver's InitProducerId (a commit that InitProducerId aborted half-way, refused with
INVALID_TXN_STATE, is fenced too). Reads never return such a write: below the last stable offset
they are read_committed, above it a record counts only once its commit marker is read.

Claims: the record with key ``prefix:<prefix>`` holds the query key that owns a
``transactionalIdPrefix`` (:meth:`KafkaIntentStore.claim`, written through the fence when a query
first plans on a driver); :meth:`KafkaIntentStore.claim_owner` reads it, and a tombstone on that
key releases it (:func:`release_prefix`).

Invariants:
- ``write`` of an intent or a partial record reads the key first and refuses to replace a done
  record (``intents.refuse_replacing_done``); through the fence nothing can land between that
  read and the append, since a write after another driver's InitProducerId is refused.
- ``write`` returns once the record is on every in-sync replica (``acks=all``, at least two of
  them on a cluster of two brokers or more); a failure raises, and the committer then stops
  before its next step.
- ``last(key)`` returns the record with the highest offset for ``key``. It reads backwards in
  growing windows from the end of the partition, so finding a recent record costs one or two
  small fetches however long the log is; in a process that has read or written the key before,
  it reads only what was appended since (the position is cached per cluster, topic and key).
  A key with no record costs one pass over the partition, except a batch job's new write id:
  its planning notes the end offset (``new_key_from``), the plan carries it to the commit's
  process (``known_new_from``), and the commit reads only what was appended since. The client
  (its connections and metadata) is kept for the next store the process opens with the same
  config, unless a call failed; one store uses it at a time.
- A query has one writer at a time (Spark refuses to run two instances of a query id); the
  cached position never hides a newer record, since every ``last`` reads up to the end offset.
- ``last`` never returns a record older than one this process has seen or one the listed end
  offset covers: a leader that has not caught up (after a leader change) is retried until the
  deadline, not read short (:class:`~kafka_sink.admin.topic_log.TopicLog` ``at_least`` and its
  high-watermark check), and a timeout raises. The last stable offset is held to the last
  stable offset seen before, the high watermark to the records seen or written (a record
  written above an open transaction is above the last stable offset until it ends).
- Every query shares partition 0, so a transaction another writer left open there (a driver
  killed between a fenced write and its commit) holds the last stable offset below later
  records of every key. "Not readable yet" is never taken for "not there": ``last`` also reads
  ``[last stable offset, high watermark)`` with read_uncommitted (``TopicLog.tail``) and settles
  each record of its key by its transaction's marker. A committed one there is the latest; an
  aborted one is ignored; other keys' open records cost nothing. A record of its key still open
  after the key's latest committed one (not this driver's own failed write, which only its next
  write or abort ends) makes it poll until the store's deadline, then raise
  :class:`IntentStoreError` naming the topic, partition, the open range and why. The claim
  check and the done-record guard read through ``last`` the same way.
- Errors name the topic, what was refused and the fix (ACLs, creating the topic, the option).

Other writers: every exactly-once principal may write to the topic, so what a read finds there
is not trusted. Decoding is bounded (``records/fetched.py``: 64 MiB per Fetch answer, so a
decompression bomb costs a driver about twice that at most), and a batch that cannot be decoded
(a bomb past the limit, a header key that is not UTF-8, records that do not parse) comes to the
store as a :class:`~kafka_sink.errors.CorruptRecordError` naming the topic, partition and offset.
Its keys cannot be known, so the choice rests on its CRC-32C, checked before decoding:

- CRC matches: the bytes are the ones its producer wrote (the broker checks the CRC on append).
  No store writes such a batch (each write is one record, a UTF-8 key and a JSON value of a few
  KB, no headers, which always decodes within the limit), so it holds no record of any store:
  it is passed over with one warning per batch and process (the first 100; then at debug
  level), and skipping it cannot make ``last`` return an older record than the latest.
- CRC does not match: the bytes changed after the broker took them, and the batch may be one of
  the store's own; reading on could return an older record as the latest, so the read fails
  (:class:`IntentStoreError` naming the topic, partition and offset).

Records that decode are filtered by key as always: another writer's records under other keys
never matter. A query's own latest record (or a claim) that is not what this store writes (not
UTF-8, not JSON, not a valid format-1 record) fails that query's read, naming the key, topic,
partition and offset, and the fix; other queries are not affected.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace

from kafka_sink.admin.topic_log import OpenTransactionError, ProducerState, TopicLog
from kafka_sink.errors import (
    ClusterAuthorizationFailedError,
    CorruptRecordError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTxnStateError,
    KafkaError,
    ProducerFencedError,
    TopicAuthorizationFailedError,
)
from kafka_sink.records.batch import Record
from kafka_sink.sink_errors import IntentStoreError, SinkError
from kafka_sink.spark.driver.eos.fence import DriverFence, FenceToken
from kafka_sink.spark.driver.eos.intents import (
    DONE,
    BatchRecord,
    record_from_json,
    record_to_json,
    refuse_replacing_done,
)

__all__ = [
    "FORMAT",
    "PARTITION",
    "IntentStoreError",
    "KafkaIntentStore",
    "claim_key",
    "close_idle",
    "release_prefix",
    "topic_settings",
]

log = logging.getLogger(__name__)

FORMAT = 1
# Every query's records, whatever the topic's partition count.
PARTITION = 0
# What survives the loss of one broker: two copies of every acknowledged record.
_MIN_COPIES = 2
# The first backward window, in offsets; each further window is four times the previous one.
_FIRST_WINDOW = 32
_WINDOW_GROWTH = 4
_SEGMENT_MS = "600000"
_CLAIM_HEAD = "prefix:"
# A write through a fence another InitProducerId superseded. INVALID_TXN_STATE is one too: the
# write's transaction, at the fence's producer id and epoch and ended by nobody here, was ended
# by the coordinator, for another InitProducerId of the fence id (under Transactions V2 one
# caught half-way has aborted it and not yet moved the id on, so this commit reads as a retry
# of an aborted transaction) or for its timeout, which bumps the epoch too. Either way this
# token is spent, and the record never becomes visible.
_FENCED = (
    ProducerFencedError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTxnStateError,
)


def claim_key(prefix: str) -> str:
    """The store key of ``prefix``'s claim (never a query id: those are UUIDs or write ids)."""
    return _CLAIM_HEAD + prefix


@dataclass(frozen=True)
class _Position:
    next_offset: int
    value: bytes | None  # the key's latest record value (None: no record, or a tombstone)
    offset: int = -1  # where that record was read (-1: none, or written by this process)
    stable: int = 0  # the last stable offset listed when it was read (0: none listed)


# (bootstrap servers, topic, partition, key) -> what this process last knew of the key.
_POSITIONS: dict[tuple[str, str, int, str], _Position] = {}
# (bootstrap servers, topic) of the topics this process has checked.
_CHECKED: set[tuple[str, str]] = set()
# (bootstrap servers, topic, partition, offset) of the undecodable batches this process warned of;
# past the first _MAX_SKIP_WARNINGS (a writer appending garbage on purpose) they are logged at
# debug level only.
_SKIPPED: set[tuple[str, str, int | None, int | None]] = set()
_MAX_SKIP_WARNINGS = 100
# Whether this process has warned that an intent topic lives on a 1-broker cluster.
_WARNED_SINGLE_BROKER = False
# Idle connections to a cluster, by the producer config (Spark plans and commits every
# micro-batch in long-lived driver-side workers: a warm client spares a connection, ApiVersions
# and Metadata per call). A log is taken out while a store uses it and put back by close().
_IDLE: dict[tuple[tuple[str, str], ...], TopicLog] = {}
_lock = threading.Lock()


def close_idle() -> None:
    """Close the clients kept for reuse (tests; a process exits without it)."""
    with _lock:
        logs = list(_IDLE.values())
        _IDLE.clear()
    for log in logs:
        log.close()


def topic_settings(brokers: int) -> tuple[int, dict[str, str]]:
    """Replication factor and topic configs of a new intent topic on ``brokers`` brokers."""
    replication = max(1, min(3, brokers))
    return replication, {
        "cleanup.policy": "compact",
        "min.insync.replicas": str(min(_MIN_COPIES, replication)),
        "segment.ms": _SEGMENT_MS,
    }


class KafkaIntentStore:
    """Intents of exactly-once writes, kept in a compacted topic of the sink's cluster."""

    def __init__(
        self,
        log: TopicLog,
        topic: str,
        *,
        cluster: str,
        pool_key: tuple[tuple[str, str], ...] | None = None,
        fence: DriverFence | None = None,
    ) -> None:
        self.log = log
        self.topic = topic
        self.cluster = cluster
        self.fence = fence
        self._pool_key = pool_key
        self._healthy = True

    @classmethod
    def open(
        cls,
        producer_config: Mapping[str, str],
        topic: str,
        *,
        timeout_s: float | None = None,
        fence: DriverFence | None = None,
    ) -> KafkaIntentStore:
        """Connect (or take this process's idle client), and create or check ``topic`` (once per
        process and cluster)."""
        cluster = producer_config.get("bootstrap.servers", "")
        key = (*sorted(producer_config.items()), ("", str(timeout_s)))
        with _lock:
            log = _IDLE.pop(key, None)
        if log is None:
            log = TopicLog.from_config(producer_config, timeout_s)
        try:
            with _lock:
                checked = (cluster, topic) in _CHECKED
            if not checked:
                _prepare_topic(log, topic)
                with _lock:
                    _CHECKED.add((cluster, topic))
            return cls(log, topic, cluster=cluster, pool_key=key, fence=fence)
        except BaseException:
            log.close()
            raise

    def close(self) -> None:
        """Give the client back for the next store of this process (closed after a failure)."""
        if self._pool_key is None or not self._healthy:
            self.log.close()
            return
        with _lock:
            previous = _IDLE.get(self._pool_key)
            _IDLE[self._pool_key] = self.log
        if previous is not None and previous is not self.log:
            previous.close()

    # -- IntentStore --------------------------------------------------------------------------

    def last(self, query_key: str) -> BatchRecord | None:
        value, offset = self._latest_at(query_key)
        return _decode(value, self._where(query_key, offset))

    def new_key_from(self, query_key: str) -> int:
        """The partition's end offset now, for a key no record can have yet (a batch job's new
        write id): every record of it lies at or above the offset returned."""
        try:
            end = self.log.end_offset(self.topic, PARTITION)
        except KafkaError as exc:
            self._healthy = False
            raise IntentStoreError(self._failure("read", exc)) from exc
        self.known_new_from(query_key, end)
        return end

    def known_new_from(self, query_key: str, offset: int) -> None:
        """Take ``query_key`` as having no record below ``offset`` (from
        :meth:`new_key_from`, maybe in another process): its ``last`` then reads only from
        there, not the partition back to its start. What this process knows already stands."""
        slot = (self.cluster, self.topic, PARTITION, query_key)
        with _lock:
            _POSITIONS.setdefault(slot, _Position(offset, None, stable=offset))

    def delete(self, query_key: str) -> None:
        """Drop ``query_key``'s state (a tombstone; compaction then removes the key)."""
        self._append(query_key, None, f"deleting the record of {query_key!r}")

    def write(self, record: BatchRecord) -> None:
        self.write_within(record, None)

    def write_within(self, record: BatchRecord, timeout_ms: int | None) -> None:
        """``write``, given up after ``timeout_ms`` (None: the client's ``max.block.ms``): the
        commit bounds its intent by the time the batch's transactions have left. The bound
        covers the read before the append too: what the read took is not left to the append,
        and a read that used it all gives up without appending."""
        began = time.monotonic()
        if record.state != DONE:
            # Read, then append through the fence: a writer whose append follows another
            # driver's InitProducerId is refused, so what it read is still the latest.
            refuse_replacing_done(self.last(record.query_key), record)
        if timeout_ms is not None:
            timeout_ms -= int((time.monotonic() - began) * 1000)
            if timeout_ms <= 0:
                raise IntentStoreError(
                    f"the {record.state} record of batch {record.batch_id} was not written to "
                    f"the intent topic {self.topic!r}: reading its key took all of the time "
                    "the batch's transactions had left"
                )
        value = json.dumps({"format": FORMAT, **record_to_json(record)}, sort_keys=True)
        self._append(
            record.query_key,
            value.encode("utf-8"),
            f"writing the {record.state} record of batch {record.batch_id}",
            timeout_ms,
        )

    # -- claims -------------------------------------------------------------------------------

    def claim_owner(self, prefix: str) -> str | None:
        """The query key that claimed ``prefix``; None when no query holds it."""
        key = claim_key(prefix)
        value, offset = self._latest_at(key)
        if value is None:
            return None
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise IntentStoreError(
                f"the claim {self._where(key, offset)} is not a UTF-8 query key ({exc}): it was "
                f"not written by this sink. {_UNREADABLE_FIX}"
            ) from None

    def claim(self, prefix: str, query_key: str) -> None:
        """Record that ``query_key`` owns ``prefix`` (through the fence: a fenced claim raises)."""
        self._append(claim_key(prefix), query_key.encode("utf-8"), f"claiming {prefix!r}")

    # -- the log ------------------------------------------------------------------------------

    def _latest(self, key_text: str) -> bytes | None:
        return self._latest_at(key_text)[0]

    def _latest_at(self, key_text: str) -> tuple[bytes | None, int]:
        """The latest value of ``key_text`` and its offset (-1: no record read here)."""
        key = key_text.encode("utf-8")
        slot = (self.cluster, self.topic, PARTITION, key_text)
        with _lock:
            known = _POSITIONS.get(slot)
        try:
            # Never below what this process has seen (a shorter log is a leader catching up);
            # the last stable offset is compared with the last stable offset seen only, since a
            # transaction left open on the shared partition holds it below this key's records.
            tail = self.log.tail(
                self.topic,
                PARTITION,
                key,
                start=0 if known is None else known.next_offset,
                stable_at_least=0 if known is None else known.stable,
                at_least=0 if known is None else known.next_offset,
                own_producer_id=-1 if self.fence is None else self.fence.token.producer_id,
                on_corrupt=self._unreadable,
            )
            if tail.latest is not None:  # committed past the last stable offset
                found, at = tail.latest.value, tail.latest.offset
            elif known is not None:
                found, at = self._forward(key, known, tail.stable)
            else:
                found, at = self._backward(key, tail.stable)
        except OpenTransactionError as exc:
            self._healthy = False
            raise IntentStoreError(self._still_open(key_text, exc)) from exc
        except SinkError:
            # ``_unreadable``'s own refusal keeps its message (a SinkError is a KafkaError too).
            raise
        except KafkaError as exc:
            self._healthy = False
            raise IntentStoreError(self._failure("read", exc)) from exc
        with _lock:
            _POSITIONS[slot] = _Position(tail.end, found, at, tail.stable)
        return found, at

    def _append(
        self, key_text: str, value: bytes | None, doing: str, timeout_ms: int | None = None
    ) -> None:
        key = key_text.encode("utf-8")
        try:
            if self.fence is None:
                bound = {} if timeout_ms is None else {"timeout_ms": timeout_ms}
                offset = self.log.append(self.topic, PARTITION, key, value, **bound)
            else:
                offset = self._append_fenced(key, value, timeout_ms)
        except _FENCED as exc:
            self._healthy = False
            assert self.fence is not None  # only a fenced write is refused as fenced
            raise self.fence.error(doing, exc) from exc
        except KafkaError as exc:
            self._healthy = False
            raise IntentStoreError(self._failure("write", exc)) from exc
        slot = (self.cluster, self.topic, PARTITION, key_text)
        with _lock:
            if offset < 0:  # written by an earlier try whose answer was lost: read it again
                _POSITIONS.pop(slot, None)
            else:
                # Whatever lies below ``offset`` is older than this record.
                known = _POSITIONS.get(slot)
                stable = 0 if known is None else known.stable
                _POSITIONS[slot] = _Position(offset + 1, value, stable=stable)

    def _abort_fenced(self, state: ProducerState) -> None:
        assert self.fence is not None
        try:
            state = self.log.abort_transactional(self.topic, PARTITION, state)
        except KafkaError as exc:
            if self._relearned():
                return
            log.warning(
                "could not abort the failed write to the intent topic %r (the coordinator "
                "aborts it after 60 s, which fences this driver): %s",
                self.topic,
                exc,
            )
            # The failed batch may have landed at this sequence, in a transaction still open: a
            # next write at it would be taken for a retry of that batch and append nothing. It
            # goes after it (the log steps back once if the leader never had that batch).
            state = replace(state, sequence=state.sequence + 1)
        self.fence.advance(_token(state))

    def _relearned(self) -> bool:
        """Under Transactions V2, whether the failed write's own EndTxn moved the fence on (its
        answer lost, then the abort refused): the fence then continues at the coordinator's
        epoch instead of one behind it, which the next write would find fenced."""
        assert self.fence is not None
        try:
            return self.log.transactions_v2(self.topic, PARTITION) and self.fence.relearn()
        except KafkaError as exc:
            log.warning("could not ask where the fence %r stands: %s", self.fence.prefix, exc)
            return False

    def _append_fenced(self, key: bytes, value: bytes | None, timeout_ms: int | None) -> int:
        assert self.fence is not None
        token = self.fence.token
        state = ProducerState(
            token.transactional_id, token.producer_id, token.producer_epoch, token.sequence
        )
        try:
            bound = {} if timeout_ms is None else {"timeout_ms": timeout_ms}
            offset, state = self.log.append_transactional(
                self.topic, PARTITION, key, value, state, **bound
            )
        except _FENCED:
            raise
        except KafkaError:
            # The record may be in the log, in a transaction left open: end it, so that it never
            # becomes visible, holds no reader of the shared partition back, and is not
            # committed by this fence's next write.
            self._abort_fenced(state)
            raise
        self.fence.advance(_token(state))
        return offset

    # -- reading ------------------------------------------------------------------------------

    def _forward(self, key: bytes, known: _Position, end: int) -> tuple[bytes | None, int]:
        found, at = known.value, known.offset
        if known.next_offset >= end:
            return found, at
        for record in self._read(known.next_offset, end):
            if record.key == key:
                found, at = record.value, record.offset
        return found, at

    def _backward(self, key: bytes, end: int) -> tuple[bytes | None, int]:
        high = end
        window = _FIRST_WINDOW
        while high > 0:
            low = max(0, high - window)
            latest: tuple[bytes | None, int] | None = None
            for record in self._read(low, high):
                if record.key == key:
                    latest = record.value, record.offset
            if latest is not None:
                return latest
            high = low
            window *= _WINDOW_GROWTH
        return None, -1

    def _read(self, start: int, end: int) -> Iterator[Record]:
        return self.log.read(self.topic, PARTITION, start, end, on_corrupt=self._unreadable)

    def _unreadable(self, error: CorruptRecordError) -> None:
        """A batch of the topic that cannot be decoded: passed over when no store can have
        written it (its CRC-32C matched, so its writer made it so), else the read fails."""
        if not error.checksum_ok:
            raise IntentStoreError(
                f"the exactly-once intent store cannot read topic {self.topic!r}: {error}. The "
                "batch's bytes changed after the broker accepted them, so it may hold this "
                "query's latest record and reading on could return an older one. Fix: check the "
                "brokers' disks and logs for that partition, or set option 'intentTopic' to a "
                "new topic (the queries that used this one then start without their intents)"
            )
        where = (self.cluster, self.topic, error.partition, error.offset)
        with _lock:
            new = where not in _SKIPPED and len(_SKIPPED) < _MAX_SKIP_WARNINGS
            if new:
                _SKIPPED.add(where)
        if new:
            log.warning(
                "the exactly-once intent store skips a record batch it did not write and cannot "
                "read in topic %r (another client of the topic wrote it): %s",
                self.topic,
                error,
            )
        else:
            log.debug("skipped again: %s", error)

    def _where(self, key_text: str, offset: int) -> str:
        at = "" if offset < 0 else f" at offset {offset}"
        return f"of key {key_text!r} in {self.topic}-{PARTITION}{at}"

    def _still_open(self, key_text: str, exc: OpenTransactionError) -> str:
        return (
            f"the exactly-once intent store cannot tell the latest record of key {key_text!r} "
            f"in topic {self.topic!r}: {exc}. Every query shares {self.topic}-{PARTITION}, and a "
            f"transaction left open there (a driver or another client killed between its write "
            f"and its commit) hides what follows it from read_committed readers until it ends; "
            f"the open range [{exc.stable}, {exc.end}) may hold this key's latest record, and "
            "reading below it could return an older one. The transaction is aborted by the "
            "transaction coordinator after its transaction.timeout.ms: run the query again "
            f"then, or find and end it with kafka-transactions.sh --bootstrap-server ... "
            f"describe-producers --topic {self.topic} --partition {PARTITION}"
        )

    def _failure(self, what: str, exc: KafkaError) -> str:
        return f"the exactly-once intent store could not {what} topic {self.topic!r}: {exc}. " + (
            _fix_for(exc, self.topic)
        )


_FIX = (
    "The sink's principal needs READ, WRITE and DESCRIBE on topic '{topic}' (and CREATE, unless "
    "the topic exists: cleanup.policy=compact, 1 partition, replicated like "
    "__transaction_state). Fix: grant them, or set option 'intentTopic' to a topic it may use, "
    "or use intentStore=checkpoint where the checkpoint is a local directory"
)


def _fix_for(exc: KafkaError, topic: str) -> str:
    if isinstance(exc, (TopicAuthorizationFailedError, ClusterAuthorizationFailedError)):
        return _FIX.format(topic=topic)
    return (
        "Check that the brokers in kafka.bootstrap.servers are reachable from the driver and "
        "healthy (the topic's partition needs a leader and min.insync.replicas in-sync replicas)"
    )


def _prepare_topic(log: TopicLog, topic: str) -> None:
    """Create ``topic`` when missing, then refuse it unless it can keep every intent."""
    try:
        brokers = len(log.brokers())
        if log.partition_count(topic) is None:
            replication, configs = topic_settings(brokers)
            log.ensure_topic(topic, partitions=1, replication_factor=replication, configs=configs)
        # Checked even when just created: a concurrent creator's settings win.
        found = log.topic_config(topic, ["cleanup.policy", "min.insync.replicas"])
        replicas = len(log.replicas(topic, PARTITION))
    except KafkaError as exc:
        raise IntentStoreError(
            f"the exactly-once intent store could not look up or create topic {topic!r}: {exc}. "
            + _fix_for(exc, topic)
        ) from exc
    _check_cleanup_policy(topic, found.get("cleanup.policy", ""))
    _check_durability(topic, brokers, replicas, found.get("min.insync.replicas", "1"))


def _check_cleanup_policy(topic: str, policy: str) -> None:
    if {p.strip() for p in policy.split(",")} != {"compact"}:
        raise IntentStoreError(
            f"topic {topic!r} has cleanup.policy={policy!r}: the exactly-once intent store needs "
            "cleanup.policy=compact alone (a deleting policy drops the state of a query idle for "
            f"longer than retention.ms). Fix: kafka-configs --alter --entity-type topics "
            f"--entity-name {topic} --add-config cleanup.policy=compact, or set option "
            "'intentTopic' to another topic (the sink creates a missing one compacted)"
        )


def _check_durability(topic: str, brokers: int, replicas: int, min_insync: str) -> None:
    global _WARNED_SINGLE_BROKER
    if brokers < _MIN_COPIES:
        with _lock:
            warned, _WARNED_SINGLE_BROKER = _WARNED_SINGLE_BROKER, True
        if not warned:
            log.warning(
                "the exactly-once intent topic %r lives on a cluster of %d broker: its records "
                "have one copy and are lost with that broker's disk (on a cluster of 2 brokers or "
                "more the sink requires replication and min.insync.replicas of at least 2)",
                topic,
                brokers,
            )
        return
    try:
        min_copies = int(min_insync)
    except ValueError:
        min_copies = 0
    if replicas >= _MIN_COPIES and min_copies >= _MIN_COPIES:
        return
    raise IntentStoreError(
        f"topic {topic!r} has replication factor {replicas} and min.insync.replicas="
        f"{min_insync} on a cluster of {brokers} brokers: the exactly-once intent store needs "
        f"both at least {_MIN_COPIES}, or an acknowledged intent may live on one broker only and "
        "be lost with it. Fix: raise the replication factor with kafka-reassign-partitions and "
        f"run kafka-configs --alter --entity-type topics --entity-name {topic} --add-config "
        f"min.insync.replicas={_MIN_COPIES}, or set option 'intentTopic' to a topic that does "
        "not exist yet (the sink creates it with replication min(3, brokers) and "
        f"min.insync.replicas {_MIN_COPIES})"
    )


def _token(state: ProducerState) -> FenceToken:
    return FenceToken(
        state.transactional_id, state.producer_id, state.producer_epoch, state.sequence
    )


_UNREADABLE_FIX = (
    "Fix: find which client of the topic wrote it (every exactly-once principal may write "
    "there) and stop it; then write a valid record over it, or delete the key with "
    "kafka_sink.spark.driver.eos.kafka_intents.release_prefix for a claim, or give the query a new "
    "checkpoint"
)


def _decode(value: bytes | None, where: str = "") -> BatchRecord | None:
    """The record a value of a query's own key holds; IntentStoreError naming ``where`` (its
    key, topic, partition and offset) when it is not one this store wrote."""
    if value is None:
        return None  # a tombstone: the key was deleted
    try:
        data = json.loads(value)
    except ValueError as exc:  # not UTF-8, or not JSON
        raise IntentStoreError(
            f"the intent record {where} is not JSON ({exc}): it was not written by this sink. "
            f"{_UNREADABLE_FIX}"
        ) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise IntentStoreError(
            f"the intent record {where} has format "
            f"{data.get('format') if isinstance(data, dict) else '?'}, which this version of the "
            f"sink does not read (it reads format {FORMAT})"
        )
    try:
        return record_from_json(data)
    except (KeyError, IndexError, TypeError, ValueError, AssertionError) as exc:
        raise IntentStoreError(
            f"the intent record {where} is format {FORMAT} but not a valid one ({exc!r}): it was "
            f"not written by this sink. {_UNREADABLE_FIX}"
        ) from None


def release_prefix(producer_config: Mapping[str, str], prefix: str, topic: str) -> None:
    """Release ``prefix``'s claim (a tombstone on its key), for a query that is gone for good:
    ``release_prefix({"bootstrap.servers": ...}, "<prefix>", "pykafka-commit-intents")``."""
    store = KafkaIntentStore.open(producer_config, topic)
    try:
        store.delete(claim_key(prefix))
    finally:
        store.close()
