"""What the driver-side Python workers import: Spark plans and commits every micro-batch of a
streaming query in Python workers of their own, which must not load the executor-side stack."""

from __future__ import annotations

import subprocess
import sys
import textwrap

_PROBE = textwrap.dedent(
    """
    import sys, tempfile
    import pyspark.sql.worker.write_into_data_source  # what Spark's planning worker runs
    from pyspark.sql.datasource import CaseInsensitiveDict
    from pyspark.sql.types import BinaryType, StructField, StructType

    from pyspark_pykafka import DefaultSource

    schema = StructType([StructField("key", BinaryType()), StructField("value", BinaryType())])
    options = CaseInsensitiveDict(
        {"kafka.bootstrap.servers": "h:9092", "topic": "t",
         "checkpointLocation": tempfile.mkdtemp()}
    )
    writer = DefaultSource(options).streamWriter(schema=schema, overwrite=False)
    writer.commit([None], 0)
    loaded = sorted(
        m for m in sys.modules
        if m.split(".")[0] in ("numpy", "pandas")
        or m in ("pyarrow.compute", "kafka_sink.spark.columns", "kafka_sink.producer.producer",
                 "kafka_sink.records", "kafka_sink.net.network_client")
    )
    print(",".join(loaded))
    """
)


def test_planning_and_commit_load_no_executor_modules() -> None:
    # pyarrow itself is Spark's (its planning worker imports it); numpy, pyarrow.compute, the
    # producer and the record encoders are only needed where write() runs.
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "", f"driver-side path imported: {out.stdout.strip()}"
