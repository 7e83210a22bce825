"""A batch write with a slow first attempt that Spark speculates, run on the standalone cluster.

Run by test_spark_standalone as ``python standalone_speculation.py JOBS_DIR BOOTSTRAP TOPIC
GUARANTEE PREFIX COMMIT_LOG`` with the cluster's settings (speculation on) in
``$SPARK_CONF_DIR/spark-defaults.conf``. Partition 1's first attempt writes its first rows, then
stalls: Spark launches a speculative copy on the other executor, which writes the whole partition
and wins; the first attempt is killed with some of its rows in Kafka. Prints one ``ATTEMPTS``
line: the attempt numbers of partition 1 that wrote rows (read back from the values).
"""

from __future__ import annotations

import sys

ROWS = 2000
STALL_AT = 700  # partition 1 holds ids 1000..1999; its first attempt stalls at id 1700


def main() -> int:
    jobs, bootstrap, topic, guarantee, prefix, commit_log = sys.argv[1:7]
    sys.path.insert(0, jobs)
    from _common import spark_session
    from pyspark.sql import functions as sf
    from pyspark.sql.types import StringType

    spark = spark_session("pykafka-speculation", "WARN")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    half = ROWS // 2

    @sf.udf(returnType=StringType(), useArrow=False)
    def stall_first_attempt(i: int) -> str:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        attempt = ctx.attemptNumber() if ctx is not None else -1
        if attempt == 0 and i == half + STALL_AT:
            import time

            time.sleep(120)  # until Spark kills this attempt, its copy having won
        # Wide values: the UDF's worker hands rows on in 64 KiB chunks, and the rows before the
        # stall must reach the writer (and Kafka) first.
        return f"{i}:{attempt}:".ljust(1000, "x")

    df = spark.range(0, ROWS, numPartitions=2).select(
        stall_first_attempt(sf.col("id")).alias("value")
    )
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "topic": topic,
        "deliveryGuarantee": guarantee,
        "commitLog": commit_log,
    }
    if guarantee == "exactly-once":
        options["transactionalIdPrefix"] = prefix
    df.write.format("pykafka").mode("append").options(**options).save()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
