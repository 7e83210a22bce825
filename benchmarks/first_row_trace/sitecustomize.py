"""Tracing for ``bench_first_row.py --trace`` (never on a production path): every Python
process that has this directory on its path appends, to the file ``$FIRST_ROW_TRACE``, one line
per event with the wall time, the process id and what happened: the process started (or was
forked from Spark's daemon), which PySpark worker module it runs, and when selected steps of the
sink (and of the discarding source) began and ended. Steps are wrapped right after their module
is first imported, so a process that never imports a module pays nothing for it."""

from __future__ import annotations

import atexit
import functools
import importlib.abc
import importlib.util
import os
import sys
import time

_PATH = os.environ.get("FIRST_ROW_TRACE")

# module -> attributes (``Class.method`` or function) to time.
_STEPS = {
    "kafka_sink.spark.datasource": (
        "PyKafkaDataSource.writer",
        "PyKafkaDataSource.streamWriter",
        "_preflight",
        "_format_plan",
    ),
    "kafka_sink.spark.driver.preflight": ("check_write", "_session", "_brokers", "_metadata"),
    "kafka_sink.spark.writer": ("_WriterCore._write", "_WriterCore._record"),
    "kafka_sink.spark.executor.task": ("write_task", "_TaskWrite.run"),
    "kafka_sink.spark.executor.producer_cache": ("_create", "release"),
    "kafka_sink.producer.bulk": ("BulkProducer.flush", "BulkProducer.send_columns"),
    "kafka_sink.producer.producer": (
        "KafkaProducer.__init__",
        "KafkaProducer.flush",
        "KafkaProducer.partitions_for",
    ),
    "python_discard": ("DiscardWriter.write", "DiscardWriter.commit", "DiscardDataSource.writer"),
    "pyspark.sql.worker.lookup_data_sources": ("main",),
    "pyspark.sql.worker.create_data_source": ("main",),
    "pyspark.sql.worker.write_into_data_source": ("main",),
    "pyspark.sql.worker.commit_data_source_write": ("main",),
    "pyspark.sql.worker.python_streaming_sink_runner": ("main",),
    "pyspark.worker": ("main",),
}


def _log(what: str) -> None:
    if _PATH is None:
        return
    with open(_PATH, "a") as f:
        f.write(f"{time.time():.4f} {os.getpid()} {what}\n")


def _wrap(owner: object, name: str, label: str) -> None:
    fn = getattr(owner, name, None)
    if fn is None or getattr(fn, "_first_row_traced", False):
        return

    @functools.wraps(fn)
    def traced(*args: object, **kwargs: object) -> object:
        _log(f"begin {label}")
        try:
            return fn(*args, **kwargs)
        finally:
            _log(f"end {label}")

    traced._first_row_traced = True  # type: ignore[attr-defined]
    setattr(owner, name, traced)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
        if fullname not in _STEPS:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_wrap(module):  # type: ignore[no-untyped-def]
            exec_module(module)
            _log(f"imported {fullname} {getattr(module, '__file__', '')}")
            for attr in _STEPS[fullname]:
                owner: object = module
                *outer, last = attr.split(".")
                for part in outer:
                    owner = getattr(owner, part, None)
                if owner is not None:
                    _wrap(owner, last, f"{fullname}:{attr}")

        loader.exec_module = exec_and_wrap  # type: ignore[method-assign]
        return spec


if _PATH is not None:
    sys.meta_path.insert(0, _Finder())
    _log(
        "start "
        + " ".join(sys.argv[:3] if sys.argv else ["?"])
        + f" main={getattr(sys.modules.get('__main__'), '__spec__', None)}"
    )
    os.register_at_fork(after_in_child=lambda: _log("forked"))
    atexit.register(lambda: _log("exit"))
