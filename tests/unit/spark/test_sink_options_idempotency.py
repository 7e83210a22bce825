"""Option ``idempotencyKey``: where it is refused, and the identity a key gives a batch job."""

from __future__ import annotations

import pytest

from kafka_sink.sink_errors import SinkOptionError
from kafka_sink.spark.datasource import PyKafkaDataSource
from kafka_sink.spark.driver.eos.idempotency import TOPIC_COLUMN_MARKER, job_identity
from kafka_sink.spark.options import SinkOptions

EOS = {"kafka.bootstrap.servers": "localhost:9092", "deliveryGuarantee": "exactly-once"}


def test_the_key_is_kept_as_given_and_spark_lower_cases_its_name() -> None:
    for name in ("idempotencyKey", "idempotencykey"):
        opts = SinkOptions.from_options({**EOS, name: "daily-2026-11-25"})
        assert opts.idempotency_key == "daily-2026-11-25"
    assert SinkOptions.from_options(EOS).idempotency_key is None


def test_the_key_is_refused_with_at_least_once() -> None:
    with pytest.raises(
        SinkOptionError, match=r"'idempotencyKey' is only used with deliveryGuarantee=exactly-once"
    ):
        SinkOptions.from_options({"kafka.bootstrap.servers": "h:1", "idempotencyKey": "k"})


@pytest.mark.parametrize("value", ["", "   ", "x" * 250, "a\nb"])
def test_an_empty_over_long_or_unprintable_key_is_refused(value: str) -> None:
    with pytest.raises(SinkOptionError, match=r"option 'idempotencyKey' must be 1 to 200"):
        SinkOptions.from_options({**EOS, "idempotencyKey": value})


def test_the_key_is_refused_on_a_streaming_write() -> None:
    from pyspark.sql.types import BinaryType, StructField, StructType

    source = PyKafkaDataSource({**EOS, "topic": "t", "idempotencyKey": "k"})
    schema = StructType([StructField("value", BinaryType())])
    with pytest.raises(
        SinkOptionError, match=r"'idempotencyKey' is for batch writes.*checkpoint.*Fix: remove"
    ):
        source.streamWriter(schema, False)


def test_a_key_names_the_same_prefix_and_record_on_every_run() -> None:
    a = job_identity("k1", topic="t", prefix=None)
    assert a == job_identity("k1", topic="t", prefix=None)
    assert a.prefix.startswith("pykafka-job-") and len(a.prefix) <= 40
    assert a.query_key != a.prefix
    # Another key, another topic set or another prefix is another job.
    others = [
        job_identity("k2", topic="t", prefix=None),
        job_identity("k1", topic="u", prefix=None),
        job_identity("k1", topic=None, prefix=None),
        job_identity("k1", topic="t", prefix="mine"),
    ]
    assert len({o.query_key for o in [a, *others]}) == 5
    assert others[2].topics == TOPIC_COLUMN_MARKER
    assert others[3].prefix == "mine"
