"""The driver process of the logging tests: its whole output is what a user's driver shows.

``python logs_child.py BOOTSTRAP BATCH_TOPIC STREAM_TOPIC WORK_DIR [EOS_TOPIC]``: one local[2]
SparkSession that prints a ``=== <step>`` line to stderr before each step:

- ``option-warn``: a batch write with ``.option("logLevel", "WARN")``;
- ``conf-warn``: the same write with ``spark.pykafka.logLevel=WARN`` in the session's conf;
- ``default``: the same write with neither;
- ``stream``: a streaming query over 40 rows in 2 Spark partitions, held by the test-only hook
  ``task-done`` (``$PYKAFKA_TEST_COMMIT_PAUSE_DIR``, ``$PYKAFKA_TEST_PAUSE_AT``; see
  ``kafka_sink/spark/fault_hooks.py``) once its tasks' rows are acknowledged, then stopped with
  ``query.stop()``; ``=== stopped`` follows;
- ``stream-eos`` (with ``EOS_TOPIC``): the same query with ``deliveryGuarantee=exactly-once``
  (checkpoint ``WORK_DIR/checkpoint-eos``), held and stopped the same way; ``=== stopped-eos``
  follows.

Batch writes run as batch ``job`` of the hook: the test lets them through with
``resume-task-done-job``. Every wait is bounded.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

STREAM_ROWS = 40


def _step(name: str) -> None:
    sys.stderr.write(f"=== {name}\n")
    sys.stderr.flush()


def main() -> int:
    bootstrap, batch_topic, stream_topic, work = sys.argv[1:5]
    eos_topic = sys.argv[5] if len(sys.argv) > 5 else None
    from sparkutil import child_session

    spark = child_session("pykafka-logs")
    options = {"kafka.bootstrap.servers": bootstrap, "kafka.linger.ms": "5"}
    df = spark.range(0, 30, numPartitions=2).selectExpr("CAST(id AS STRING) AS value")

    def write(**extra: str) -> None:
        writer = df.write.format("pykafka").mode("append").options(**options, **extra)
        writer.option("topic", batch_topic).save()

    _step("option-warn")
    write(logLevel="WARN")
    _step("conf-warn")
    spark.conf.set("spark.pykafka.logLevel", "WARN")
    write()
    spark.conf.unset("spark.pykafka.logLevel")
    _step("default")
    write()

    source = Path(work) / "input"
    source.mkdir()
    (source / "rows.json").write_text(
        "".join(f'{{"value": "s{i}"}}\n' for i in range(STREAM_ROWS)), encoding="utf-8"
    )
    pause = Path(os.environ["PYKAFKA_TEST_COMMIT_PAUSE_DIR"])

    def stop_mid_batch(topic: str, checkpoint: str, **extra: str) -> bool:
        """A query over the rows, stopped while its first batch's tasks are held."""
        paused = pause / "paused-task-done-0"
        paused.unlink(missing_ok=True)  # left by the previous query's batch 0
        query = (
            spark.readStream.schema("value string")
            .json(str(source))
            .repartition(2)
            .writeStream.format("pykafka")
            .options(**options, **extra)
            .option("topic", topic)
            .option("checkpointLocation", str(Path(work) / checkpoint))
            .start()
        )
        deadline = time.monotonic() + 180
        while not paused.exists():
            if time.monotonic() > deadline or not query.isActive:
                sys.stderr.write(f"the batch was never held: {query.exception()}\n")
                return False
            time.sleep(0.1)
        time.sleep(1.0)  # both tasks reach the hold (local[2]: they run side by side)
        query.stop()
        return True

    _step("stream")
    if not stop_mid_batch(stream_topic, "checkpoint"):
        return 1
    _step("stopped")
    if eos_topic is not None:
        _step("stream-eos")
        if not stop_mid_batch(eos_topic, "checkpoint-eos", deliveryGuarantee="exactly-once"):
            return 1
        _step("stopped-eos")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
