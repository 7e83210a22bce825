"""pykafka: write Spark DataFrames to Apache Kafka through a pure-Python producer.

The producer core imports without pyspark; the Spark data source is loaded on first use of
:data:`PyKafkaDataSource` so ``import kafka_sink`` stays cheap on executors and in plain Python.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from kafka_sink.producer.producer import KafkaProducer
    from kafka_sink.spark.datasource import PyKafkaDataSource

__all__ = ["KafkaProducer", "PyKafkaDataSource", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "KafkaProducer":
        from kafka_sink.producer.producer import KafkaProducer

        return KafkaProducer
    if name == "PyKafkaDataSource":
        from kafka_sink.spark.datasource import PyKafkaDataSource

        return PyKafkaDataSource
    raise AttributeError(f"module 'kafka_sink' has no attribute {name!r}")
