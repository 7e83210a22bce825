"""A batch job run until it ends or is killed: the driver process of the idempotencyKey tests.

``python idempotent_job_child.py BOOTSTRAP TOPIC ROWS KEY PREFIX INTENT_TOPIC COMMIT_LOG
[MASTER]``: one SparkSession (MASTER, by default local[2]) writes the values 0..ROWS-1 (3 Spark
partitions) to TOPIC exactly-once, with ``idempotencyKey`` KEY (``-``: none, and then the
transactional prefix PREFIX). Prints
``DONE`` when the job succeeded. The test SIGKILLs this process's group at a pause of the commit
(``$PYKAFKA_TEST_COMMIT_PAUSE_DIR``, see ``kafka_sink/spark/fault_hooks.py``).
"""

from __future__ import annotations

import sys


def main() -> int:
    bootstrap, topic, rows, key, prefix, intent_topic, commit_log = sys.argv[1:8]
    master = sys.argv[8] if len(sys.argv) > 8 else "local[2]"
    from sparkutil import child_session

    spark = child_session("pykafka-idempotent-job", master)
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "topic": topic,
        "deliveryGuarantee": "exactly-once",
        "intentTopic": intent_topic,
        "commitLog": commit_log,
    }
    if key == "-":
        options["transactionalIdPrefix"] = prefix
    else:
        options["idempotencyKey"] = key
    df = spark.range(0, int(rows), numPartitions=3).selectExpr("CAST(id AS STRING) AS value")
    df.write.format("pykafka").mode("append").options(**options).save()
    print("DONE", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
