"""``register(spark)``: make ``format("pykafka")`` known to a session and check its workers.

Role: Spark runs every piece of a Python data source (the driver's planning and commits too) in
Python workers it starts with ``PYSPARK_PYTHON`` / ``spark.pyspark.python``, not in the
interpreter the session was built in. When that Python lacks the package, Spark only says
``DATA_SOURCE_NOT_FOUND`` (discovery ran there) or ``ModuleNotFoundError: No module named
'kafka_sink'`` (a registered source could not be unpickled there), neither naming the setting.
``register`` asks one worker, with a one-row job, which interpreter it is and whether it can
import the sink, and fails with a message naming that interpreter and the setting to change.

Invariants:
- The job's function is shipped by value (``worker_probe``), so it runs on a worker that cannot
  import ``kafka_sink``; it is a plain (not Arrow) Python UDF, so it needs no pyarrow there.
- Works on a classic and a Spark Connect session (a DataFrame job, no ``SparkContext``).
- The message is one line and names the interpreter the worker reported (or, when no worker
  could run the job, the one the session is configured with) and the settings to change.
- Registering where Spark already holds the discovered ``pyspark_pykafka`` source succeeds
  when that source runs where the workers do: PySpark 4.0 refuses to replace a discovered
  source (``DATA_SOURCE_ALREADY_EXISTS``) where 4.1 and later let a registration take its
  place, and a discovered source is bound to the interpreter of the driver's environment
  variables, so ``register`` fails, naming both, when that is not the workers' interpreter.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from typing import Any

from kafka_sink.sink_errors import SinkWorkerError
from kafka_sink.spark import worker_probe
from kafka_sink.spark.datasource import PyKafkaDataSource

__all__ = ["check_workers", "register", "register_source"]

_SETTINGS = "PYSPARK_PYTHON (or spark.pyspark.python; on a cluster, the nodes' Python)"


def register(spark: Any) -> None:
    """Register ``format("pykafka")`` in ``spark`` (classic or Connect) and check its workers.

    Raises :class:`~kafka_sink.sink_errors.SinkWorkerError` when the Python Spark starts for
    its workers cannot import the sink.
    """
    kept = not register_source(spark)
    workers_python = check_workers(spark)
    if kept:
        _refuse_other_interpreter(spark, workers_python)


def register_source(spark: Any) -> bool:
    """``spark.dataSource.register(PyKafkaDataSource)``; False, registering nothing, where Spark
    already has the discovered source under the name and keeps it (PySpark 4.0)."""
    try:
        spark.dataSource.register(PyKafkaDataSource)
    except Exception as exc:
        if _error_class(exc) != "DATA_SOURCE_ALREADY_EXISTS":
            raise
        return False
    return True


def _refuse_other_interpreter(spark: Any, workers_python: str) -> None:
    """PySpark 4.0 binds a discovered source to the interpreter of ``PYSPARK_DRIVER_PYTHON``,
    else ``PYSPARK_PYTHON``, else ``python3``, as the session started, and a registration cannot
    rebind it: when that is not the Python this session's workers run, the sink's planning,
    commits and tasks would run elsewhere than ``register`` checked."""
    bound = _discovered_python(spark)
    if bound is None or _same_interpreter(bound, workers_python):
        return
    raise SinkWorkerError(
        f"format('pykafka') was discovered by Spark with {bound} (PYSPARK_DRIVER_PYTHON, else "
        f"PYSPARK_PYTHON, else python3, when the session started), and PySpark 4.0 cannot "
        f"register it again for this session's workers, which run {workers_python}. Fix: set "
        f"PYSPARK_DRIVER_PYTHON and PYSPARK_PYTHON to {workers_python} before the session "
        f"starts (PySpark 4.1 and later rebind the source on register)"
    )


def _discovered_python(spark: Any) -> str | None:
    """The interpreter a classic session's ``pykafka`` source is bound to; None when the session
    cannot say (Spark Connect: the server holds it)."""
    try:
        manager = spark._jsparkSession.sessionState().dataSourceManager()
        source = manager.lookupDataSource(PyKafkaDataSource.name())
        return str(source.dataSourceCls().pythonExec())
    except Exception:
        return None


def _same_interpreter(a: str, b: str) -> bool:
    def resolved(path: str) -> str:
        return os.path.realpath(shutil.which(path) or path)

    return resolved(a) == resolved(b)


def _error_class(exc: BaseException) -> str | None:
    # PySpark's errors name their class; a classic session's and a Connect client's alike.
    get = getattr(exc, "getCondition", None) or getattr(exc, "getErrorClass", None)
    if get is None:
        return None
    try:
        condition = get()
    except Exception:
        return None
    return condition if isinstance(condition, str) else None


def check_workers(spark: Any) -> str:
    """Run a one-row job; raise :class:`SinkWorkerError` if its worker cannot run the sink, else
    return the worker's interpreter."""
    try:
        report = json.loads(_ask_a_worker(spark))
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SinkWorkerError(
            f"format('pykafka') could not check the Python Spark starts for its workers "
            f"({_configured_python(spark)}): a one-row Python job failed: {first}. "
            f"Fix: point {_SETTINGS} at an interpreter with pykafka-sink installed "
            f"(this session's is {sys.executable})"
        ) from exc
    missing: list[str] = report["missing"]
    if not missing:
        return str(report["executable"])
    raise SinkWorkerError(
        f"format('pykafka') cannot run in this session's workers: Spark starts them with "
        f"{report['executable']} (Python {report['version']}), which cannot import "
        f"{', '.join(missing)}. Spark uses {_SETTINGS}, not the interpreter this session "
        f"was built in ({sys.executable}). Fix: set PYSPARK_PYTHON to an interpreter that has "
        f"pykafka-sink installed before the session starts (or spark.pyspark.python), or "
        f"install pykafka-sink into {report['executable']}"
    )


def _ask_a_worker(spark: Any) -> str:
    from pyspark import cloudpickle
    from pyspark.sql.functions import udf

    # By value: the worker may be unable to import the module it is defined in.
    cloudpickle.register_pickle_by_value(worker_probe)  # type: ignore[no-untyped-call]
    try:
        probe = udf(worker_probe.probe, "string", useArrow=False)
        row = spark.range(1).select(probe().alias("report")).first()
    finally:
        cloudpickle.unregister_pickle_by_value(worker_probe)  # type: ignore[no-untyped-call]
    return str(row["report"])


def _configured_python(spark: Any) -> str:
    try:
        conf = spark.conf.get("spark.pyspark.python", None)
    except Exception:  # a Connect server may refuse to show a static conf
        conf = None
    if conf:
        return f"spark.pyspark.python={conf}"
    env = os.environ.get("PYSPARK_PYTHON")
    return f"PYSPARK_PYTHON={env}" if env else "PYSPARK_PYTHON not set: python3 on the PATH"
