"""One real SparkSession (local[2,2]) shared by every Spark test, with pykafka registered.

``local[2,2]``: two task threads, and a failed task is retried once (the retry test relies on
it). Shuffle partitions are 2 and the UI is off: this machine has two cores shared with Kafka.
Python workers run the interpreter running the tests, unless PYSPARK_PYTHON says otherwise.
The session's JVM gets Spark's own Avro functions (the spark-avro jar of
``$SPARK_KAFKA_JARS_DIR``, fetched by ``make setup``) when the jar is there, so that the tests
reading the sink's Avro back with ``from_avro`` need no SparkSession of their own;
``spark_avro`` is that session, and fails (naming the make target) when the jar is missing.

``local_s3`` (session, started only by the tests that ask for it): a real S3-compatible server
(S3Proxy, ``kafka_sink.testing.s3``), with a ``bucket`` and ``aws`` (this process's AWS
variables pointing at it). ``spark_env`` gives the Python workers Spark starts for
pykafka extra environment variables (the AWS ones, for instance) for one test: the data source is
registered again with them in the SparkContext's environment, and again without them after.
``proxied_kafka`` (a single-node Kafka behind a TCP proxy) is in ``tests/conftest.py``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_sink.testing.local_kafka import KafkaSetupError
from kafka_sink.testing.s3 import LocalS3, S3SetupError, S3StartError

_SPARK_AVRO_GLOB = "spark-avro_*.jar"
_SPARK_JARS_TARGET = "make setup (target .cache/spark-kafka/lib/.fetched)"


def _spark_avro_jars() -> list[str]:
    """The spark-avro jar of ``$SPARK_KAFKA_JARS_DIR`` (or the checkout's cache), if fetched."""
    root = Path(__file__).resolve().parents[2]
    folder = Path(os.environ.get("SPARK_KAFKA_JARS_DIR") or root / ".cache/spark-kafka/lib")
    return [str(p) for p in sorted(folder.glob(_SPARK_AVRO_GLOB))]


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from kafka_sink.spark.workers import register_source

    session = (
        SparkSession.builder.master("local[2,2]")
        .appName("pykafka-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.jars", ",".join(_spark_avro_jars()))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register_source(session)  # PySpark 4.0 keeps a discovered source: nothing to replace
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def spark_avro(request: pytest.FixtureRequest) -> Any:
    """The shared session, with Spark's ``from_avro`` / ``to_avro`` (the spark-avro jar)."""
    if not _spark_avro_jars():
        pytest.fail(
            f"no {_SPARK_AVRO_GLOB} in $SPARK_KAFKA_JARS_DIR: Spark's Avro functions are "
            f"missing. Fix: {_SPARK_JARS_TARGET}",
            pytrace=False,
        )
    return request.getfixturevalue("spark")


@pytest.fixture(scope="session")
def local_s3() -> Iterator[LocalS3]:
    server = LocalS3()
    try:
        server.start()
    except (S3SetupError, S3StartError, KafkaSetupError) as exc:
        pytest.fail(f"no S3 server for the tests: {exc}", pytrace=False)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def bucket(local_s3: LocalS3) -> str:
    """A bucket of the session's S3 server."""
    name = f"commits-{uuid.uuid4().hex[:8]}"
    local_s3.create_bucket(name)
    return name


@pytest.fixture
def aws(local_s3: LocalS3, monkeypatch: pytest.MonkeyPatch) -> LocalS3:
    """This process's environment points the AWS SDK at the server (the driver's view)."""
    for key, value in local_s3.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    return local_s3


@pytest.fixture
def spark_env(
    spark,
) -> Iterator[Callable[[dict[str, str]], contextlib.AbstractContextManager[None]]]:
    from kafka_sink.spark.datasource import PyKafkaDataSource

    sc = spark.sparkContext

    @contextlib.contextmanager
    def using(env: dict[str, str]) -> Iterator[None]:
        saved = {k: sc.environment.get(k) for k in env}
        sc.environment.update(env)
        spark.dataSource.register(PyKafkaDataSource)  # the workers' environment is taken here
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    sc.environment.pop(key, None)
                else:
                    sc.environment[key] = value
            spark.dataSource.register(PyKafkaDataSource)

    yield using
