"""Shared plumbing of the jobs: Spark session, sink options from files and flags.

Each job runs both ways:
- ``spark-submit --properties-file conf/spark-defaults.conf jobs/<job>.py ...``
- ``python jobs/<job>.py ...`` (SPARK_CONF_DIR defaults to ``conf/``, so the same defaults apply).
"""

from __future__ import annotations

import argparse
import os
import pkgutil
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = ROOT / "conf"


def add_sink_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every job takes to reach Kafka."""
    group = parser.add_argument_group("Kafka sink")
    group.add_argument("--bootstrap-servers", help="Kafka bootstrap servers, host:port[,...]")
    group.add_argument("--topic", help="topic to write to (overrides a 'topic' column)")
    group.add_argument(
        "--options-file",
        help="key=value lines of format('pykafka') options, e.g. conf/sink.example.properties",
    )
    group.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="one format('pykafka') option, e.g. kafka.linger.ms=10 (repeatable)",
    )
    group.add_argument(
        "--commit-log",
        help="directory for the driver's commit files (option commitLog): a path or a store URI",
    )
    parser.add_argument(
        "--spark-log-level",
        choices=("ERROR", "WARN", "INFO", "DEBUG"),
        help="Spark's log level (default: as configured, WARN in conf/)",
    )


def read_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """``key=value`` lines; blank lines and lines starting with # are skipped."""
    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            text = line.strip()
            if not text or text.startswith(("#", "!")):
                continue
            if "=" not in text:
                # The line is not quoted: it may be "key: value" with a password as the value.
                raise SystemExit(f"{path}:{number}: expected key=value (the line has no '=')")
            key, value = text.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def sink_options(args: argparse.Namespace) -> dict[str, str]:
    """Options for format('pykafka'): file, then --option, then the dedicated flags."""
    options: dict[str, str] = {}
    if args.options_file:
        options.update(read_properties(args.options_file))
    for item in args.option:
        if "=" not in item:
            raise SystemExit(f"--option expects KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        options[key.strip()] = value.strip()
    if args.bootstrap_servers:
        options["kafka.bootstrap.servers"] = args.bootstrap_servers
    if args.topic:
        options["topic"] = args.topic
    if args.commit_log:
        # A path is made absolute (Spark's driver may run elsewhere); a store URI stays as given.
        is_uri = "://" in args.commit_log or args.commit_log.startswith("file:")
        options["commitLog"] = args.commit_log if is_uri else os.path.abspath(args.commit_log)
    if "kafka.bootstrap.servers" not in options:
        raise SystemExit("no Kafka: give --bootstrap-servers or kafka.bootstrap.servers")
    return options


def spark_session(app_name: str, log_level: str | None = None) -> Any:
    """The job's SparkSession, with format('pykafka') registered.

    Python workers run the interpreter ``worker_python`` picks: ``spark.pyspark.python`` when
    configured (``--conf``, a properties file, ``spark-defaults.conf``), else ``$PYSPARK_PYTHON``,
    else this job's own interpreter (which has kafka_sink installed). The sink also runs Python
    on the driver (planning and commits) with that same interpreter, so it is checked here.
    """
    os.environ.setdefault("SPARK_CONF_DIR", str(CONF_DIR))
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    from kafka_sink.spark.datasource import PyKafkaDataSource

    # Start (or, under spark-submit, join) the JVM first: its SparkConf holds what spark-submit
    # and the properties files configured. PySpark itself only reads $PYSPARK_PYTHON.
    SparkContext._ensure_initialized()
    python = worker_python(SparkConf().get("spark.pyspark.python"), os.environ)
    problem = driver_cannot_run(python, os.getcwd())
    if problem:
        raise SystemExit(problem)
    os.environ["PYSPARK_PYTHON"] = python
    spark = (
        SparkSession.builder.appName(app_name)
        .config("spark.pyspark.python", python)
        .config("spark.pyspark.driver.python", sys.executable)
        .getOrCreate()
    )
    if log_level:
        spark.sparkContext.setLogLevel(log_level)
    bound = _registered_python(spark)
    if (not _discoverable()) if bound is _UNKNOWN else bound is None:
        # Registration is per session; Spark finds it on its own where its lookup Python can
        # see pyspark_pykafka (a normal install, or the repository root as working directory).
        spark.dataSource.register(PyKafkaDataSource)
        bound = _registered_python(spark)
    problem = None if bound in (None, _UNKNOWN) else source_mismatch(str(bound), python)
    if problem:
        spark.stop()
        raise SystemExit(problem)
    return spark


_UNKNOWN = object()


def _registered_python(spark: Any) -> object:
    """The interpreter format('pykafka') is bound to in ``spark``; None if not registered.

    ``_UNKNOWN`` where the JVM's data source manager cannot be asked (another Spark version).
    """
    try:
        manager = spark._jsparkSession.sessionState().dataSourceManager()
        if not manager.dataSourceExists("pykafka"):
            return None
        return str(manager.lookupDataSource("pykafka").dataSourceCls().pythonExec())
    except Exception:
        return _UNKNOWN


def source_mismatch(bound: str, python: str) -> str | None:
    """Why the registered format('pykafka') would not run ``python``, or None.

    Spark registers the data sources it discovers (``pyspark_*`` modules) with the driver JVM's
    ``$PYSPARK_DRIVER_PYTHON`` (else ``$PYSPARK_PYTHON``), and runs them with that interpreter on
    the executors too, whatever ``spark.pyspark.python`` says; a discovered source also wins over
    one registered later.
    """

    def real(path: str) -> str:
        return os.path.realpath(shutil.which(path) or path)

    if bound == python or real(bound) == real(python):
        return None
    return (
        f"Spark registered format('pykafka') by itself, bound to {bound!r} (the driver's "
        f"PYSPARK_DRIVER_PYTHON), and would run that interpreter on the executors instead of "
        f"{python!r} (spark.pyspark.python, else PYSPARK_PYTHON). Fix: set "
        "PYSPARK_DRIVER_PYTHON to that same interpreter (with a shipped archive: "
        "PYSPARK_DRIVER_PYTHON=./environment/bin/python, submitting from a directory where the "
        "archive is unpacked as ./environment)."
    )


def worker_python(configured: str | None, environ: Mapping[str, str]) -> str:
    """The Python that Spark's workers run: ``spark.pyspark.python``, ``$PYSPARK_PYTHON``, ours.

    Spark documents that the property takes precedence over the variable; spark-submit applies
    that order, but a plain ``python job.py`` launch would otherwise ignore the property.
    """
    return configured or environ.get("PYSPARK_PYTHON") or sys.executable


def driver_cannot_run(python: str, cwd: str) -> str | None:
    """Why the driver cannot start ``python`` (a relative path missing from ``cwd``), or None.

    A Python data source runs the workers' interpreter on the driver too, resolved against the
    driver's working directory. ``./environment/bin/python`` from a shipped archive exists in the
    executors' directories, not in the driver's in client mode; Spark would fail at the first
    write with a bare "Cannot run program".
    """
    if os.path.isabs(python) or os.sep not in python:
        return None  # absolute, or a name looked up on PATH (python3)
    if os.path.exists(os.path.join(cwd, python)):
        return None
    return (
        f"spark.pyspark.python / PYSPARK_PYTHON is {python!r}, which does not exist in the "
        f"driver's working directory {cwd}. format('pykafka') runs that interpreter on the "
        "driver as well as on the executors (planning and commits). Fix: submit from a "
        "directory holding the same environment (e.g. unpack the archive given to "
        "--archives there, as ./environment), use cluster deploy mode (YARN, Kubernetes), or "
        "give a path that exists on every node."
    )


def _discoverable() -> bool:
    """Whether Spark's Python workers will find ``pyspark_pykafka`` by themselves.

    They scan ``pkgutil.iter_modules()``, and run as ``python -m`` in this working directory, so
    the working directory is on their path. An editable install's import hook is not scanned.
    """
    paths = [os.getcwd(), *sys.path]
    return any(m.name == "pyspark_pykafka" for m in pkgutil.iter_modules(paths))


def describe(options: Mapping[str, str]) -> str:
    """Options for printing: keys that may hold secrets are masked."""
    from kafka_sink.net.config import SECRET_KEYS

    secret = ("password", "jaas", "secret", "token")

    def hidden(key: str) -> bool:
        key = key.strip().lower()
        return any(s in key for s in secret) or key.removeprefix("kafka.") in SECRET_KEYS

    shown = {k: ("***" if hidden(k) else v) for k, v in options.items()}
    return ", ".join(f"{k}={v}" for k, v in sorted(shown.items()))
