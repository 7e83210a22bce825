"""The commit documents of a commit log, oldest first.

Role: :func:`load_commits` opens the location given to ``report`` through the commit log's own
stores (``spark/commit_log/store.py``: local, S3, GCS, Azure, HDFS) and returns its commit
documents sorted by commit time.

Invariants:
- A location holding a ``pykafka-commits`` directory (a streaming checkpoint) is read there;
  any other location is read as the commit log itself.
- Only commit documents count: aborts (``*.aborted.json``), the earlier files a re-run batch
  replaced (``*.replaced-<ms>``) and files that are not the sink's commit JSON are left out.
"""

from __future__ import annotations

import json
from typing import Any

from kafka_sink.spark.commit_log.store import join, open_store
from kafka_sink.spark.options import COMMIT_LOG_DIRNAME

__all__ = ["load_commits"]


def _commit_names(names: list[str]) -> list[str]:
    return [n for n in names if n.endswith(".json") and not n.endswith(".aborted.json")]


def load_commits(location: str) -> tuple[str, list[dict[str, Any]]]:
    """(the commit log read, its commit documents by commit time)."""
    nested = join(location, COMMIT_LOG_DIRNAME)
    store = open_store(nested)
    names = _commit_names(store.names())
    if not names:
        store = open_store(location)
        names = _commit_names(store.names())
    documents = []
    for name in names:
        data = store.read(name)
        if data is None:
            continue
        try:
            document = json.loads(data)
        except ValueError:
            continue
        if (
            isinstance(document, dict)
            and document.get("format") == "pykafka-commit"
            and document.get("kind") == "commit"
        ):
            documents.append(document)
    documents.sort(key=lambda d: (d.get("committed_at_ms", 0), d.get("batch_id") or 0))
    return store.location, documents
