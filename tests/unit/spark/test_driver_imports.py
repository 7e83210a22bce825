"""What the entry points of a write import: every Python process of a write (the data source
lookup, the planning, each task's worker, the commit) imports them first, so what they load is
paid before the first row is written. Each probe imports one in a fresh interpreter. (What the
driver's planning and commit load needs a broker: tests/broker/test_driver_imports_broker.py.)
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# What only some writes need, imported where such a write asks for it: a format's catalog,
# registry client and encoder; OAUTHBEARER's token sources (and the HTTP client under them, which
# the metrics push shares); exactly-once's committer and intent stores. Every Python process of a
# write (the data source lookup, the planning, each task's worker, the commit) imports the entry
# points below first, so what they load is paid before the first row is written.
_ONLY_SOME_WRITES = (
    "kafka_sink.formats.catalog",
    "kafka_sink.formats.plan",
    "kafka_sink.formats.registry",
    "kafka_sink.formats.batch_encoder",
    "kafka_sink.net.oauth.sources",
    "kafka_sink.net.oauth.oidc",
    "kafka_sink.net.http",
    "kafka_sink.spark.driver.eos.committer",
    "kafka_sink.spark.driver.eos.kafka_intents",
    "kafka_sink.spark.driver.eos.start",
    "kafka_sink.spark.executor.slots",
    "kafka_sink.admin.transactions",
)


@pytest.mark.parametrize(
    "entry",
    [
        "pyspark_pykafka",  # the data source lookup and the planning unpickle the source
        "kafka_sink.spark.writer",  # the commit and every task unpickle the writer
        "kafka_sink.spark.executor.task",  # a task's write() imports it
    ],
)
def test_the_entry_points_load_nothing_only_some_writes_need(entry: str) -> None:
    probe = f"import json, sys\nimport {entry}\nprint(json.dumps(sorted(sys.modules)))\n"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    modules = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert sorted(modules & set(_ONLY_SOME_WRITES)) == []
