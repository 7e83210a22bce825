"""pykafka: write Spark DataFrames to Apache Kafka through a pure-Python producer.

The rooms, each importing only the ones listed after it (``docs/architecture.md`` has the map):
``spark`` (the data source: driver-side ``writer``, executor-side ``task``, ``eos/`` for
exactly-once, ``commit_log/``), ``producer`` (``KafkaProducer``; ``txn/`` for transactions),
``admin`` (what needs no producer: end, list and abort transactions, read a small topic back),
``net`` (sockets, TLS, SASL, metadata), ``records`` (record batches, codecs, murmur2, the Arrow
column normaliser), ``wire`` (the protocol as data); ``errors``, ``clock`` and ``prepared`` are
shared leaves; ``testing`` holds LocalKafka and the other test servers.

The story of a record: a Spark task (``spark.executor.task``) turns an Arrow batch into columns
(``spark.executor.columns``, ``records.arrow``), the producer's bulk path partitions and encodes
them (``producer.bulk``, ``records.columnar``) into the ``RecordAccumulator``; the ``Sender`` thread
drains ready batches into Produce requests over the ``NetworkClient``; acknowledged offsets come
back as futures, fold into the task's commit message, and the driver (``spark.writer``) records
them in the commit log.

The story of a transaction (exactly-once): each task attempt writes in a transaction of its own
(``producer.txn``) and prepares it (``prepared.PreparedTransaction``); the driver records an
intent (``spark.driver.eos``), commits every prepared transaction with EndTxn
(``admin.transactions``), then records done.

The producer core imports without pyspark; the Spark data source is loaded on first use of
:data:`PyKafkaDataSource` so ``import kafka_sink`` stays cheap on executors and in plain Python.
Every public name here is loaded on first use, for the same reason.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from kafka_sink.admin.transactions import (
        TransactionListing,
        abort_transactions,
        complete_transaction,
        list_transactions,
    )
    from kafka_sink.prepared import PreparedTransaction
    from kafka_sink.producer.producer import KafkaProducer
    from kafka_sink.spark.datasource import PyKafkaDataSource
    from kafka_sink.spark.driver.eos import release_prefix

# Public name -> the module that defines it.
_LAZY = {
    "KafkaProducer": "kafka_sink.producer.producer",
    "PreparedTransaction": "kafka_sink.prepared",
    "TransactionListing": "kafka_sink.admin.transactions",
    "abort_transactions": "kafka_sink.admin.transactions",
    "complete_transaction": "kafka_sink.admin.transactions",
    "list_transactions": "kafka_sink.admin.transactions",
    "PyKafkaDataSource": "kafka_sink.spark.datasource",
    "release_prefix": "kafka_sink.spark.driver.eos",
}

__all__ = [
    "KafkaProducer",
    "PreparedTransaction",
    "PyKafkaDataSource",
    "TransactionListing",
    "__version__",
    "abort_transactions",
    "complete_transaction",
    "list_transactions",
    "release_prefix",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kafka_sink' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
