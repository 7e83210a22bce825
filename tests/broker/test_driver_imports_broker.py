"""What the driver-side Python workers import: Spark plans and commits every micro-batch of a
streaming query in Python workers of their own, which must not load the executor-side stack.

Each probe runs what those workers run, in a fresh interpreter: the planning call
(``streamWriter()``; exactly-once it also settles the transaction timeout with the brokers, opens
the intent store and recovers, here with nothing to recover) and the commit (``commit()``;
exactly-once it writes the intent and sweeps the prefix's open transactions). Both ask the
cluster before any task runs (the preflight, through the admin client), so both probes run
against a real broker, where topic 't' is created on first use. (What the entry points of
every process of a write load is checked without a broker, in
tests/unit/spark/test_driver_imports.py.)
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

_PROBE = textwrap.dedent(
    """
    import json, os, sys, tempfile, uuid
    import pyspark.sql.worker.write_into_data_source  # what Spark's planning worker runs
    from pyspark.sql.datasource import CaseInsensitiveDict
    from pyspark.sql.types import BinaryType, StructField, StructType

    from pyspark_pykafka import DefaultSource

    bootstrap, guarantee = sys.argv[1], sys.argv[2]
    checkpoint = tempfile.mkdtemp()
    with open(os.path.join(checkpoint, "metadata"), "w") as f:  # as Spark writes it
        f.write(json.dumps({"id": str(uuid.uuid4())}) + "\\n")
    os.makedirs(os.path.join(checkpoint, "offsets"))  # Spark writes them before planning
    with open(os.path.join(checkpoint, "offsets", "0"), "w") as f:
        f.write("v1\\n")
    schema = StructType([StructField("key", BinaryType()), StructField("value", BinaryType())])
    options = CaseInsensitiveDict(
        {"kafka.bootstrap.servers": bootstrap, "topic": "t", "checkpointLocation": checkpoint,
         "deliveryGuarantee": guarantee}
    )
    # Spark builds the writer once to plan a micro-batch and once more to commit it.
    DefaultSource(options).streamWriter(schema=schema, overwrite=False)
    DefaultSource(options).streamWriter(schema=schema, overwrite=False).commit([], 0)
    print(json.dumps(sorted(sys.modules)))
    """
)

# Needed only where write() runs: numpy and pandas (by package), pyarrow.compute, the column
# conversion, the task loop, the producer facade, its bulk path and the columnar encoder. pyarrow
# itself is Spark's (its planning worker imports it).
_EXECUTOR_PACKAGES = ("numpy", "pandas")
_EXECUTOR_MODULES = (
    "pyarrow.compute",
    "kafka_sink.spark.executor.columns",
    "kafka_sink.spark.executor.task",
    "kafka_sink.producer.producer",
    "kafka_sink.producer.bulk",
    "kafka_sink.records.columnar",
)


def _loaded_by_driver(bootstrap: str, guarantee: str, forbidden: tuple[str, ...]) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, bootstrap, guarantee],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    modules = json.loads(out.stdout.strip().splitlines()[-1])
    packages = {m.split(".")[0] for m in modules} & set(_EXECUTOR_PACKAGES)
    return sorted(packages | {m for m in modules if m in forbidden})


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_planning_and_commit_load_no_executor_modules(kafka_bootstrap: str, guarantee: str) -> None:
    loaded = _loaded_by_driver(kafka_bootstrap, guarantee, _EXECUTOR_MODULES)
    assert loaded == [], f"driver-side path imported: {loaded}"
