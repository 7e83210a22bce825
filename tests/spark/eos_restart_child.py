"""A streaming query run until killed: the driver process of the exactly-once restart test.

``python eos_restart_child.py BOOTSTRAP TOPIC INPUT CHECKPOINT GUARANTEE PREFIX [KEY=VALUE...]``
(the pairs: more sink options): one local[2]
SparkSession reading one file per micro-batch from INPUT (availableNow, so a run that is not
killed processes what is left and exits 0) and writing it to TOPIC with the given guarantee.
Prints ``STARTED`` once the query runs. The test SIGKILLs this process's group at random points
(and, with ``$PYKAFKA_TEST_COMMIT_PAUSE_DIR`` set, inside the driver's commit).
"""

from __future__ import annotations

import sys


def main() -> int:
    bootstrap, topic, inputs, checkpoint, guarantee, prefix = sys.argv[1:7]
    from sparkutil import child_session

    spark = child_session("pykafka-eos-restart")
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "topic": topic,
        "deliveryGuarantee": guarantee,
        "kafka.request.timeout.ms": "10000",
    }
    if guarantee == "exactly-once":
        options["transactionalIdPrefix"] = prefix
    options.update(pair.split("=", 1) for pair in sys.argv[7:])
    query = (
        spark.readStream.option("maxFilesPerTrigger", 1)
        .text(inputs)
        .writeStream.format("pykafka")
        .options(**options)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    print("STARTED", flush=True)
    query.awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
