"""Shared plumbing of the jobs: Spark session, sink options from files and flags.

Each job runs both ways:
- ``spark-submit --properties-file conf/spark-defaults.conf jobs/<job>.py ...``
- ``python jobs/<job>.py ...`` (SPARK_CONF_DIR defaults to ``conf/``, so the same defaults apply).
"""

from __future__ import annotations

import argparse
import os
import pkgutil
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

    Python workers run ``$PYSPARK_PYTHON`` when set, else this job's own interpreter (which has
    kafka_sink installed), whatever the properties file says.
    """
    os.environ.setdefault("SPARK_CONF_DIR", str(CONF_DIR))
    python = os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from kafka_sink.spark.datasource import PyKafkaDataSource

    spark = (
        SparkSession.builder.appName(app_name)
        .config("spark.pyspark.python", python)
        .config("spark.pyspark.driver.python", sys.executable)
        .getOrCreate()
    )
    if log_level:
        spark.sparkContext.setLogLevel(log_level)
    if not _discoverable():
        # Registration is per session; Spark finds it on its own where it can see
        # pyspark_pykafka (a normal install, or the repository root as working directory).
        spark.dataSource.register(PyKafkaDataSource)
    return spark


def _discoverable() -> bool:
    """Whether Spark's Python workers will find ``pyspark_pykafka`` by themselves.

    They scan ``pkgutil.iter_modules()``, and run as ``python -m`` in this working directory, so
    the working directory is on their path. An editable install's import hook is not scanned.
    """
    paths = [os.getcwd(), *sys.path]
    return any(m.name == "pyspark_pykafka" for m in pkgutil.iter_modules(paths))


def describe(options: Mapping[str, str]) -> str:
    """Options for printing: keys that may hold secrets are masked."""
    from kafka_sink.producer.config import SECRET_KEYS

    secret = ("password", "jaas", "secret", "token")

    def hidden(key: str) -> bool:
        key = key.strip().lower()
        return any(s in key for s in secret) or key.removeprefix("kafka.") in SECRET_KEYS

    shown = {k: ("***" if hidden(k) else v) for k, v in options.items()}
    return ", ".join(f"{k}={v}" for k, v in sorted(shown.items()))
