"""Each batch's metrics pushed to a Prometheus Pushgateway (options ``metricsPushGateway``,
``metricsJob``).

Role: the driver's ``commit()`` calls :func:`push_batch` with the batch's ``metrics`` section
(``batch.py``); it turns the section and the query's running totals into Prometheus metric
families and PUTs them with ``prometheus-client`` under the job and the grouping key
``query=<queryName, else the write id>``. :func:`gateway_url` and :func:`job_name` parse the
options on the driver. The series are listed in docs/monitoring.md.

Invariants:
- A push that fails (gateway down, refused, an answer other than 2xx, slow beyond
  :data:`PUSH_TIMEOUT_S`) logs one WARNING and returns: the batch is committed already, and its
  metrics are in its commit file.
- :data:`PUSH_TIMEOUT_S` bounds the whole push (connect, TLS, sending, the gateway's answer):
  the PUT goes through :func:`kafka_sink.net.http.exchange` (the handler given to
  ``push_to_gateway``), not the library's own handler, whose timeout bounds each socket read
  only; at most :data:`PUSH_ANSWER_BYTES` of the answer are read.
- ``metricsPushGateway`` without ``prometheus-client`` installed is refused when the options are
  parsed (on the driver, before any task), naming the extra to install.
- Counters (``*_total``, the latency summary) are the totals since this driver process first
  pushed for the query; a restarted driver starts them again at zero, which Prometheus's
  ``rate()`` and ``increase()`` read as a counter reset. Gauges describe the last batch.
- Label sets are bounded: ``topic`` and ``partition`` for at most :data:`MAX_PARTITION_SERIES`
  topic-partitions per query; the records and bytes of any further ones are summed under
  ``partition="other"`` of their topic. ``pykafka_bad_records_total``'s ``reason`` is one of the
  record-level reason codes (``bad_records.REASONS``) and ``action`` deadLetter or skip.
- The gateway URL is shown without its user info in every message. ``USER:PASSWORD@`` in it is
  sent as HTTP basic auth, never in the URL; a password with an unencoded ``/``, ``?`` or ``#``
  (which a client would read as part of the host) is refused when the option is parsed.
"""

from __future__ import annotations

import base64
import importlib.util
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from kafka_sink.net.user_info import UserInfoError, mask_url, shown_value, split_user_info
from kafka_sink.sink_errors import SinkOptionError
from kafka_sink.spark.logs import ensure_logging, logger

__all__ = [
    "DEFAULT_JOB",
    "MAX_PARTITION_SERIES",
    "PUSH_ANSWER_BYTES",
    "PUSH_TIMEOUT_S",
    "gateway_url",
    "job_name",
    "push_batch",
]

DEFAULT_JOB = "pykafka"
#: A push's bound: the commit waits at most this long for the gateway, whole.
PUSH_TIMEOUT_S = 5.0
#: The most of the gateway's answer that is read (it answers a push with an empty body).
PUSH_ANSWER_BYTES = 64 * 1024
MAX_PARTITION_SERIES = 64
INSTALL_HINT = "pip install 'pykafka-sink[prometheus]'"
_JOB = re.compile(r"[A-Za-z0-9_.:-]{1,200}")


def _shown(url: str) -> str:
    return mask_url(url)


def gateway_url(value: str) -> str:
    """The option ``metricsPushGateway`` checked: an http(s) URL (``host:port`` gets http).

    ``USER:PASSWORD@`` in it is kept: :func:`push_batch` sends it as HTTP basic auth (what a
    Pushgateway started with ``--web.config.file`` asks for). A password with an unencoded
    ``/``, ``?`` or ``#`` is refused, naming no part of it.
    """
    text = value.strip()
    if not text:
        raise SinkOptionError(
            "option 'metricsPushGateway' is empty: give the Pushgateway's URL, e.g. "
            ".option('metricsPushGateway', 'http://pushgateway:9091'), or remove the option"
        )
    url = text if "://" in text else f"http://{text}"
    try:
        split = split_user_info(url)
        parsed = urlsplit(split.url)
        _ = parsed.port  # a port that is no number in 0..65535 raises ValueError
    except UserInfoError as exc:
        raise SinkOptionError(f"option 'metricsPushGateway': {exc}") from None
    except ValueError:
        parsed = None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise SinkOptionError(
            f"option 'metricsPushGateway' is {shown_value(_shown(text))}, not an http(s) URL of "
            "a Pushgateway; give e.g. 'http://pushgateway:9091'"
        )
    if split.has_user_info and split.password is None:
        raise SinkOptionError(
            "option 'metricsPushGateway' has a user name but no password before its '@': the "
            "Pushgateway's basic auth takes USER:PASSWORD@host (percent-encoded), or no "
            "credentials at all"
        )
    if importlib.util.find_spec("prometheus_client") is None:
        raise SinkOptionError(
            "option 'metricsPushGateway' needs the prometheus-client package on the driver, "
            f"which is not installed. Fix: {INSTALL_HINT}, or remove the option"
        )
    return url


def job_name(value: str) -> str:
    """The option ``metricsJob`` checked: 1 to 200 of letters, digits, ``_.:-``."""
    text = value.strip()
    if not _JOB.fullmatch(text):
        raise SinkOptionError(
            f"option 'metricsJob' is {shown_value(text)}: give 1 to 200 letters, digits or "
            f"'_.:-', e.g. .option('metricsJob', '{DEFAULT_JOB}')"
        )
    return text


@dataclass
class _Totals:
    """A query's counters since this process first pushed for it."""

    records: dict[tuple[str, str], int] = field(default_factory=dict)
    uncompressed: dict[tuple[str, str], int] = field(default_factory=dict)
    compressed: dict[tuple[str, str], int] = field(default_factory=dict)
    series: set[tuple[str, int]] = field(default_factory=set)
    retries: int = 0
    errors: int = 0
    requests: int = 0
    latency_ms_sum: float = 0.0
    throttle_ms_sum: float = 0.0
    batches: int = 0
    #: Bad rows (``onRecordError`` deadLetter / skip) per (reason, action).
    bad_records: dict[tuple[str, str], int] = field(default_factory=dict)

    def add_bad_records(self, bad: Mapping[str, Any] | None) -> None:
        if not bad:
            return
        for reason, n in bad["by_reason"].items():
            key = (reason, bad["action"])
            self.bad_records[key] = self.bad_records.get(key, 0) + n

    def add(self, section: Mapping[str, Any]) -> None:
        for p in section["partitions"]:
            key = (p["topic"], p["partition"])
            if key not in self.series and len(self.series) < MAX_PARTITION_SERIES:
                self.series.add(key)
            label = (p["topic"], str(p["partition"]) if key in self.series else "other")
            for counts, name in (
                (self.records, "records"),
                (self.uncompressed, "uncompressed_bytes"),
                (self.compressed, "compressed_bytes"),
            ):
                counts[label] = counts.get(label, 0) + p[name]
        self.retries += section["retries"]
        self.errors += section["errors"]
        self.requests += section["requests"]
        self.latency_ms_sum += (section["produce_latency_ms_avg"] or 0.0) * section["requests"]
        self.throttle_ms_sum += section["throttle_time_ms_sum"]
        self.batches += 1


_TOTALS: dict[tuple[str, str, str], _Totals] = {}


class _BatchCollector:
    """The families of one push: the query's totals and its last batch's gauges."""

    def __init__(
        self,
        totals: _Totals,
        section: Mapping[str, Any],
        batch_id: int | None,
        bad_records: Mapping[str, Any] | None = None,
    ) -> None:
        self._totals = totals
        self._section = section
        self._batch_id = batch_id
        self._bad_records = bad_records

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            SummaryMetricFamily,
        )

        t, s = self._totals, self._section
        for name, doc, counts in (
            ("pykafka_records", "Records acknowledged by Kafka", t.records),
            ("pykafka_uncompressed_bytes", "Record batch bytes before compression", t.uncompressed),
            ("pykafka_compressed_bytes", "Record batch bytes as sent", t.compressed),
        ):
            family = CounterMetricFamily(name, doc, labels=["topic", "partition"])
            for (topic, partition), value in sorted(counts.items()):
                family.add_metric([topic, partition], value)
            yield family
        yield CounterMetricFamily("pykafka_retries", "Records re-sent", value=t.retries)
        yield CounterMetricFamily("pykafka_errors", "Records failed for good", value=t.errors)
        yield CounterMetricFamily(
            "pykafka_throttle_time_seconds", "Broker throttle time", value=t.throttle_ms_sum / 1e3
        )
        yield CounterMetricFamily("pykafka_batches", "Batches committed", value=t.batches)
        if t.bad_records:
            bad = CounterMetricFamily(
                "pykafka_bad_records",
                "Rows not written to their topic (onRecordError), by reason and action",
                labels=["reason", "action"],
            )
            for (reason, action), value in sorted(t.bad_records.items()):
                bad.add_metric([reason, action], value)
            yield bad
        yield SummaryMetricFamily(
            "pykafka_produce_latency_seconds",
            "Produce request latency",
            count_value=t.requests,
            sum_value=t.latency_ms_sum / 1e3,
        )
        gauges: list[tuple[str, str, float | None]] = [
            ("pykafka_batch_id", "The last batch pushed", self._batch_id),
            ("pykafka_batch_records", "The last batch's records", s["records"]),
            ("pykafka_batch_records_per_second", "The last batch's rows/s", s["records_per_s"]),
            ("pykafka_batch_compression_ratio", "Bytes before / after", s["compression_ratio"]),
            (
                "pykafka_batch_produce_latency_max_seconds",
                "The last batch's slowest produce request",
                s["produce_latency_ms_max"] / 1e3,
            ),
            (
                "pykafka_batch_commit_duration_seconds",
                "The last batch's commit on the driver",
                s["commit_duration_ms"] / 1e3,
            ),
        ]
        if self._bad_records is not None:
            gauges.append(
                (
                    "pykafka_batch_bad_records",
                    "The last batch's bad rows (onRecordError deadLetter / skip)",
                    self._bad_records["bad_records"],
                )
            )
        transactions = s.get("transactions")
        if transactions is not None:
            gauges.append(
                (
                    "pykafka_batch_transaction_open_max_seconds",
                    "The last batch's longest first record -> commit",
                    transactions["first_record_to_commit_ms_max"] / 1e3,
                )
            )
        for name, doc, last in gauges:
            if last is not None:
                yield GaugeMetricFamily(name, doc, value=last)


def _bounded_handler(
    user: str | None, password: str | None
) -> Callable[[str, str, float | None, Sequence[tuple[str, str]], bytes], Callable[[], None]]:
    """A ``push_to_gateway`` handler whose ``timeout`` bounds the whole exchange, sending the
    URL's user info (split off the URL first) as basic auth that is never redirected."""
    # Here, not at the top: spark/options.py imports this module (for DEFAULT_JOB) in every
    # Python process of every write, and the HTTP client is needed only by a push.
    from kafka_sink.net.http import exchange

    secret_headers: dict[str, str] = {}
    if user is not None and password is not None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        secret_headers["Authorization"] = f"Basic {token}"

    def handler(
        url: str,
        method: str,
        timeout: float | None,
        headers: Sequence[tuple[str, str]],
        data: bytes,
    ) -> Callable[[], None]:
        def push() -> None:
            answer = exchange(
                method,
                url,
                body=data,
                headers=dict(headers),
                secret_headers=secret_headers,
                timeout_ms=int((PUSH_TIMEOUT_S if timeout is None else timeout) * 1000),
                max_body_bytes=PUSH_ANSWER_BYTES,
            )
            if not 200 <= answer.status < 300:
                raise OSError(f"the Pushgateway answered HTTP {answer.status}")

        return push

    return handler


def push_batch(
    section: Mapping[str, Any],
    *,
    gateway: str,
    job: str,
    query: str,
    batch_id: int | None,
    timeout_s: float = PUSH_TIMEOUT_S,
    bad_records: Mapping[str, Any] | None = None,
) -> bool:
    """Push a batch's metrics; False (and a WARNING) when the push failed.

    ``bad_records``: the commit document's section of that name (``onRecordError`` deadLetter
    or skip), counted into ``pykafka_bad_records_total`` and ``pykafka_batch_bad_records``.
    """
    from prometheus_client import CollectorRegistry, push_to_gateway

    totals = _TOTALS.setdefault((gateway, job, query), _Totals())
    totals.add(section)
    totals.add_bad_records(bad_records)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_BatchCollector(totals, section, batch_id, bad_records))
    try:
        split = split_user_info(gateway)  # gateway_url refused what would raise here
        push_to_gateway(
            split.url,
            job=job,
            registry=registry,
            grouping_key={"query": query},
            timeout=timeout_s,
            handler=_bounded_handler(split.user, split.password),
        )
    except Exception as exc:  # a push never fails the batch
        ensure_logging()
        logger.warning(
            "pykafka metrics: pushing %s to the Pushgateway %s (job %r) failed: %s; the batch "
            "is committed and its metrics are in its commit file",
            "the batch" if batch_id is None else f"batch {batch_id}",
            _shown(gateway),
            job,
            str(exc).replace(gateway, _shown(gateway)),
        )
        return False
    return True
