"""Where a cluster's executors find Python and kafka_sink: one JSON line per task, on stdout.

Run by test_spark_standalone as ``python standalone_probe.py JOBS_DIR`` with the cluster's
settings in ``$SPARK_CONF_DIR/spark-defaults.conf``: the jobs' own session set-up
(``jobs/_common.py``) decides which interpreter the executors run.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any


def where(_: Iterator[Any]) -> Iterator[str]:
    import os
    import sys

    import pyarrow

    import kafka_sink

    yield json.dumps(
        {
            "executable": sys.executable,
            "version": f"{sys.version_info[0]}.{sys.version_info[1]}",
            "cwd": os.getcwd(),
            "kafka_sink": kafka_sink.__file__,
            "pyarrow": pyarrow.__file__,
            "path": sys.path,
        }
    )


def main() -> int:
    sys.path.insert(0, sys.argv[1])
    from _common import spark_session

    spark = spark_session("pykafka-standalone-probe", "WARN")
    rows = spark.sparkContext.parallelize(range(4), 4).mapPartitions(where).collect()
    for row in rows:
        print(f"PROBE {row}", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
