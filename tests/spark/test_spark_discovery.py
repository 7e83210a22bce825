"""format("pykafka") in a fresh SparkSession with no register() call.

PySpark registers the ``DefaultSource`` of every top-level ``pyspark_*`` module it finds on the
Python path (``pkgutil.iter_modules``). A normal install puts ``pyspark_pykafka`` there; the test
puts the source tree on PYTHONPATH, which is what such an install amounts to (an editable install
maps packages through an import hook that ``pkgutil.iter_modules`` does not list).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kafka_sink.testing.oracle import read_all

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
from pyspark.sql import SparkSession
spark = (
    SparkSession.builder.master("local[1]")
    .config("spark.ui.enabled", "false")
    .config("spark.ui.showConsoleProgress", "false")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
bootstrap, topic = sys.argv[1], sys.argv[2]
(
    spark.range(5).selectExpr("CAST(id AS STRING) AS value")
    .write.format("pykafka").mode("append")
    .option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
    .save()
)
spark.stop()
"""


def test_fresh_session_finds_pykafka_without_register(kafka_bootstrap, topic_factory) -> None:
    topic = topic_factory()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, kafka_bootstrap, topic],
        env=env,
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(int(r.value) for r in read_all(kafka_bootstrap, topic, expected=5)) == list(
        range(5)
    )
