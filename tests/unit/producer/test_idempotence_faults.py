"""Fault injection for the idempotent producer: the Sender, stepped with a ManualClock, against a
model of the broker's idempotence checks (``FakeBroker``) behind the scripted network client.

Each scenario injects one fault (a lost response, a request timeout, a network cut long enough
for batches to expire, exhausted retries, UNKNOWN_PRODUCER_ID, OUT_OF_ORDER_SEQUENCE_NUMBER, an
oversized batch that must be split) and then lets the network heal. Whatever the fault, two
invariants must hold:

- no record that reached the log is ever sent again under another (producer id, epoch,
  sequence), so no acknowledged record is stored twice; each acknowledged record is in the log
  exactly once, at the offset its future reported;
- every future completes (acknowledged or failed), and a record missing from the log is
  reported as failed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from kafka_sink.errors import InvalidRecordError, KafkaTimeoutError
from kafka_sink.wire.messages import InitProducerIdRequest, InitProducerIdResponse
from tests.fakes.producer import FakeBroker, Harness, Sent, make_harness

TP = ("t", 0)
NOT_ENOUGH_REPLICAS = 19
INVALID_RECORD = 87
UNKNOWN_PRODUCER_ID = 59
DELIVERY_TIMEOUT_MS = 10_000


@dataclass
class Fault:
    """The harness, the broker model and every record sent (value -> future)."""

    h: Harness
    broker: FakeBroker = field(default_factory=FakeBroker)
    futures: dict[bytes, Any] = field(default_factory=dict)
    _n: int = 0

    def send(self, records: int = 1) -> list[bytes]:
        """Queue ``records`` records as one batch and let the sender drain it."""
        values = []
        for _ in range(records):
            value = b"r%d" % self._n
            self._n += 1
            self.futures[value] = self.h.send(value=value)
            values.append(value)
        self.h.run()
        return values

    def pending(self) -> list[Sent]:
        return [
            s for s in self.h.network.pending() if not isinstance(s.body, InitProducerIdRequest)
        ]

    def answer(self, sent: Sent) -> None:
        self.h.network.respond(sent, self.broker.handle(sent))

    def lose_response(self, sent: Sent) -> None:
        """The broker handles the request, the connection drops before the response."""
        self.broker.handle(sent)
        self.h.network.disconnect(sent)

    def time_out(self, sent: Sent, *, reached_broker: bool = True) -> None:
        if reached_broker:
            self.broker.handle(sent)
        self.h.network.time_out(sent)

    def drop(self, sent: Sent) -> None:
        """The request never reaches the broker (the network is cut)."""
        self.h.network.disconnect(sent)

    def _answer_init(self) -> None:
        for sent in self.h.network.pending():
            if isinstance(sent.body, InitProducerIdRequest):
                self.h.network.respond(
                    sent, InitProducerIdResponse(error_code=0, producer_id=2000, producer_epoch=0)
                )

    def cut_until(self, deadline_ms: int, step_ms: int = 100) -> None:
        """Drop every request until the clock reaches ``deadline_ms``."""
        while self.h.clock.now_ms() < deadline_ms:
            for sent in self.pending():
                self.drop(sent)
            self.h.run(step_ms)

    def heal(self, limit_ms: int = 3 * DELIVERY_TIMEOUT_MS, step_ms: int = 50) -> None:
        """Answer everything normally until every future is done (bounded)."""
        end = self.h.clock.now_ms() + limit_ms
        while self.h.clock.now_ms() < end:
            self._answer_init()
            for sent in self.pending():
                self.answer(sent)
            self.h.run(step_ms)
            if all(f.done() for f in self.futures.values()) and not self.pending():
                return

    # -- invariants -------------------------------------------------------------------------

    def check(self) -> None:
        pending = [v for v, f in self.futures.items() if not f.done()]
        assert pending == [], f"futures never completed: {pending}"
        landed: dict[bytes | None, tuple[int, int, int]] = {}
        for r in self.broker.receipts:
            for i, value in enumerate(r.values):
                stamp = (r.producer_id, r.producer_epoch, r.base_sequence + i)
                if value in landed:
                    assert landed[value] == stamp, (
                        f"{value!r} reached the log as {landed[value]} and was sent again as "
                        f"{stamp}"
                    )
                elif r.appended:
                    landed[value] = stamp
        log = self.broker.logs.get(TP, [])
        values = [v for v, *_ in log]
        assert len(values) == len(set(values)), f"a record is stored twice: {values}"
        for value, future in self.futures.items():
            if future.failed():
                continue
            offset = future.get(0).offset
            assert values.count(value) == 1, f"acknowledged {value!r} is not in the log once"
            assert values[offset] == value, (value, offset, values)
        for value, future in self.futures.items():
            if value not in values:
                assert future.failed(), f"{value!r} is missing from the log yet acknowledged"

    def acked(self) -> list[bytes]:
        return [v for v, f in self.futures.items() if not f.failed()]

    def failed(self) -> list[bytes]:
        return [v for v, f in self.futures.items() if f.failed()]


def _fault(max_in_flight: int = 5, retries: int = 2**31 - 1) -> Fault:
    h = make_harness(
        linger_ms=0,
        partitions={"t": [0]},
        delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
        request_timeout_ms=3000,
        max_in_flight=max_in_flight,
        retries=retries,
    )
    f = Fault(h)
    h.init_producer_id(producer_id=1000, epoch=0)
    # A first acknowledged batch: the broker has state for the producer, pipelining may start.
    f.send()
    (first,) = f.pending()
    f.answer(first)
    h.run()
    return f


# -- scenarios ----------------------------------------------------------------------------------


def disconnect_before_response(f: Fault) -> None:
    for _ in range(3):
        f.send(2)
    for sent in f.pending():
        f.lose_response(sent)
    f.h.run()


def request_timeout(f: Fault) -> None:
    for _ in range(3):
        f.send()
    for i, sent in enumerate(f.pending()):
        f.time_out(sent, reached_broker=i != 1)
    f.h.run()


def expiry_with_later_batches_landed(f: Fault) -> None:
    """Both land, the responses are lost, the first expires while the later one is pending."""
    created = f.h.clock.now_ms()
    f.send()
    f.h.run(2000)
    f.send()
    for sent in f.pending():
        f.lose_response(sent)
    f.cut_until(created + DELIVERY_TIMEOUT_MS + 100)


def expiry_with_later_batches_lost(f: Fault) -> None:
    """Nothing lands; the first batch expires, the later ones must go out under a new epoch."""
    created = f.h.clock.now_ms()
    f.send()
    f.h.run(2000)
    f.send()
    f.send()
    f.cut_until(created + DELIVERY_TIMEOUT_MS + 100)
    f.send()  # queued while the partition's sequence is unresolved


def expiry_first_landed_later_lost(f: Fault) -> None:
    created = f.h.clock.now_ms()
    f.send()
    (a,) = f.pending()
    f.lose_response(a)
    f.h.run(2000)
    f.send()
    f.cut_until(created + DELIVERY_TIMEOUT_MS + 100)


def retries_exhausted(f: Fault) -> None:
    """The first batch lands, its retries fail until ``retries`` is spent; the next one landed."""
    f.send()
    f.send()
    for sent in f.pending():
        f.lose_response(sent)
    f.broker.reject[TP] = [NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS]
    f.h.run()


def retries_exhausted_nothing_landed(f: Fault) -> None:
    f.send()
    f.send()
    for sent in f.pending():
        f.drop(sent)
    f.broker.reject[TP] = [NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS]
    f.h.run()


def unknown_producer_id(f: Fault) -> None:
    """The broker lost the producer's state: every in-flight batch is refused, one by one."""
    for _ in range(3):
        f.send()
    f.broker.forget_producers()
    f.broker.reject[TP] = [UNKNOWN_PRODUCER_ID] * 3
    for sent in f.pending():
        f.answer(sent)
        f.h.run()
        f.h.run()


def out_of_order_sequence(f: Fault) -> None:
    """The first batch is rejected for good: the later ones get OUT_OF_ORDER_SEQUENCE_NUMBER."""
    for _ in range(3):
        f.send()
    f.broker.reject[TP] = [INVALID_RECORD]
    for sent in f.pending():
        f.answer(sent)
    f.h.run()


def split(f: Fault) -> None:
    """An oversized batch is split in two while (with in-flight 5) a later batch is in flight."""
    f.broker.max_records = 2
    f.send(4)
    f.send(1)
    for sent in f.pending():
        f.answer(sent)
    f.h.run()


def invalid_record_in_batch(f: Fault) -> None:
    """The broker names one record of a 5-record batch as invalid, a later batch in flight."""
    (*_, bad, _) = f.send(5)
    f.broker.invalid_values = {bad}
    f.send(1)
    for sent in f.pending():
        f.answer(sent)
    f.h.run()


SCENARIOS: dict[str, tuple[Callable[[Fault], None], dict[str, int]]] = {
    "disconnect-before-response": (disconnect_before_response, {}),
    "request-timeout": (request_timeout, {}),
    "expiry-later-landed": (expiry_with_later_batches_landed, {}),
    "expiry-later-lost": (expiry_with_later_batches_lost, {}),
    "expiry-first-landed-later-lost": (expiry_first_landed_later_lost, {}),
    "retries-exhausted": (retries_exhausted, {"retries": 2}),
    "retries-exhausted-nothing-landed": (retries_exhausted_nothing_landed, {"retries": 2}),
    "unknown-producer-id": (unknown_producer_id, {}),
    "out-of-order-sequence": (out_of_order_sequence, {}),
    "split-in-flight-1": (split, {"max_in_flight": 1}),
    "split-in-flight-5": (split, {"max_in_flight": 5}),
    "invalid-record-in-flight-1": (invalid_record_in_batch, {"max_in_flight": 1}),
    "invalid-record-in-flight-5": (invalid_record_in_batch, {"max_in_flight": 5}),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_fault_keeps_records_once_and_completes_every_future(name: str) -> None:
    scenario, options = SCENARIOS[name]
    f = _fault(**options)
    scenario(f)
    f.heal()
    f.check()
    # The producer still works afterwards: a new record goes through once.
    (value,) = f.send()
    f.heal()
    f.check()
    assert not f.futures[value].failed()


# -- the exact outcomes of the scenarios the review found ---------------------------------------


def test_expired_batch_does_not_resend_a_landed_later_batch_under_a_new_epoch() -> None:
    f = _fault()
    expiry_with_later_batches_landed(f)
    f.heal()
    f.check()
    first, second = list(f.futures)[1:]
    assert isinstance(f.futures[first].exception(0), KafkaTimeoutError)
    assert f.futures[second].get(0).offset == 2  # acknowledged from the broker's duplicate check
    assert f.h.tm is not None and f.h.tm.producer_epoch == 0  # resolved without a bump


def test_expired_batch_that_never_landed_bumps_once_nothing_is_in_flight() -> None:
    f = _fault()
    expiry_with_later_batches_lost(f)
    f.heal()
    f.check()
    values = list(f.futures)
    assert f.failed() == [values[1]]
    assert f.acked() == [values[0], *values[2:]]
    assert f.h.tm is not None and f.h.tm.producer_epoch == 1
    log = f.broker.logs[TP]
    assert [(epoch, seq) for _v, _pid, epoch, seq in log[1:]] == [(1, 0), (1, 1), (1, 2)]


def test_exhausted_batch_does_not_resend_a_landed_later_batch() -> None:
    f = _fault(retries=2)
    retries_exhausted(f)
    f.heal()
    f.check()
    first, second = list(f.futures)[1:]
    assert f.futures[first].failed()
    assert f.futures[second].get(0).offset == 2
    assert [v for v, *_ in f.broker.logs[TP]] == [b"r0", first, second]


def test_repeated_unknown_producer_id_bumps_the_epoch_once() -> None:
    f = _fault()
    unknown_producer_id(f)
    f.heal()
    f.check()
    assert f.failed() == []
    assert f.h.tm is not None and f.h.tm.producer_epoch == 1
    assert [(epoch, seq) for _v, _pid, epoch, seq in f.broker.logs[TP][1:]] == [
        (1, 0),
        (1, 1),
        (1, 2),
    ]


def test_split_with_max_in_flight_one_does_not_stall_the_partition() -> None:
    f = _fault(max_in_flight=1)
    split(f)
    f.heal(limit_ms=DELIVERY_TIMEOUT_MS // 2)
    f.check()
    assert f.failed() == []
    assert [v for v, *_ in f.broker.logs[TP]] == [b"r0", b"r1", b"r2", b"r3", b"r4", b"r5"]


def test_split_without_idempotence_and_max_in_flight_one_unmutes() -> None:
    h = make_harness(linger_ms=0, partitions={"t": [0]}, idempotent=False, max_in_flight=1)
    broker = FakeBroker(max_records=2)
    futures = [h.send(value=b"%d" % i) for i in range(4)]
    h.run()
    later = h.send(value=b"later")
    for _ in range(40):
        for sent in h.network.pending():
            h.network.respond(sent, broker.handle(sent))
        h.run(50)
    assert all(f.done() and not f.failed() for f in [*futures, later])
    assert [v for v, *_ in broker.logs[TP]] == [b"0", b"1", b"2", b"3", b"later"]


@pytest.mark.parametrize("max_in_flight", [1, 5])
def test_invalid_record_fails_only_the_named_record(max_in_flight: int) -> None:
    f = _fault(max_in_flight=max_in_flight)
    invalid_record_in_batch(f)
    f.heal()
    f.check()
    (bad,) = f.broker.invalid_values
    assert f.failed() == [bad]
    assert isinstance(f.futures[bad].exception(0), InvalidRecordError)
    # Every other record, before and after it, is in the log once.
    assert sorted(v for v, *_ in f.broker.logs[TP]) == sorted(f.acked())
