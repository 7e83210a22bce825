"""A streaming query run until killed: the driver process of the exactly-once restart and chaos
tests.

``python eos_restart_child.py BOOTSTRAP TOPIC INPUT CHECKPOINT GUARANTEE PREFIX [ARG...]``, each
ARG either a sink option ``KEY=VALUE`` or one of the run's own flags:

- ``--master=URL`` (default ``local[2]``), e.g. ``local-cluster[2,1,768]`` for two executor JVMs
  (``$SPARK_HOME`` must then name pyspark's directory: the executors are launched from it);
- ``--shuffle=N``: ``repartition(N, value)`` before the write, so the write stage reads a
  shuffle (an executor lost after the map stage makes Spark re-run stages);
- ``--trigger=processingTime`` (a micro-batch every second, until killed) instead of the default
  ``availableNow`` (processes what INPUT holds, then exits 0);
- ``--max-files=N``: files per micro-batch (default 1).

Reads the text files of INPUT (one row per line) and writes them to TOPIC with the given
guarantee. Prints ``STARTED`` once the query runs. The tests SIGKILL this process's group at
random points (and, with ``$PYKAFKA_TEST_COMMIT_PAUSE_DIR`` set, inside the driver's commit).
"""

from __future__ import annotations

import sys

_FLAGS = {"--master": "local[2]", "--shuffle": "0", "--trigger": "availableNow", "--max-files": "1"}


def main() -> int:
    bootstrap, topic, inputs, checkpoint, guarantee, prefix = sys.argv[1:7]
    flags = dict(_FLAGS)
    pairs = []
    for arg in sys.argv[7:]:
        name, _, value = arg.partition("=")
        if name in flags:
            flags[name] = value
        else:
            pairs.append((name, value))
    from sparkutil import child_session

    spark = child_session("pykafka-eos-restart", master=flags["--master"])
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "topic": topic,
        "deliveryGuarantee": guarantee,
        "kafka.request.timeout.ms": "10000",
    }
    if guarantee == "exactly-once":
        options["transactionalIdPrefix"] = prefix
    options.update(pairs)
    rows = spark.readStream.option("maxFilesPerTrigger", int(flags["--max-files"])).text(inputs)
    if int(flags["--shuffle"]):
        rows = rows.repartition(int(flags["--shuffle"]), "value")
    writer = (
        rows.writeStream.format("pykafka")
        .options(**options)
        .option("checkpointLocation", checkpoint)
    )
    if flags["--trigger"] == "processingTime":
        writer = writer.trigger(processingTime="1 second")
    else:
        writer = writer.trigger(availableNow=True)
    query = writer.start()
    print("STARTED", flush=True)
    query.awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
