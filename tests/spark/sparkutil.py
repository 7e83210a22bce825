"""Helpers for the Spark tests: commit-log files and Kafka read-back, compared."""

from __future__ import annotations

import glob
import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from kafka_sink.testing.oracle import ConsumedRecord

KAFKA_OPTIONS = {"kafka.linger.ms": "5"}


def commit_docs(directory: str | Path, pattern: str = "*.json") -> list[dict[str, Any]]:
    """The JSON documents in ``directory`` matching ``pattern``, in name order."""
    docs = []
    for path in sorted(glob.glob(os.path.join(str(directory), pattern))):
        with open(path, encoding="utf-8") as f:
            docs.append(json.load(f))
    return docs


def observed_ranges(records: list[ConsumedRecord]) -> dict[tuple[str, int], tuple[int, int, int]]:
    """(topic, partition) -> (first offset, last offset, count) of what a consumer read."""
    by_tp: dict[tuple[str, int], list[int]] = defaultdict(list)
    for r in records:
        by_tp[(r.topic, r.partition)].append(r.offset)
    return {tp: (min(o), max(o), len(o)) for tp, o in by_tp.items()}


def committed_ranges(doc: dict[str, Any]) -> dict[tuple[str, int], tuple[int, int, int]]:
    """(topic, partition) -> (first offset, last offset, count) from one commit document."""
    return {
        (o["topic"], o["partition"]): (o["first_offset"], o["last_offset"], o["record_count"])
        for o in doc["offsets"]
    }
