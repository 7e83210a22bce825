"""Test tooling: a real local Kafka, an independent oracle client, and network fault tools.

- :mod:`kafka_sink.testing.local_kafka`: ``LocalKafka``, Apache Kafka (KRaft, 1 or 3 nodes) from
  the Maven Central jars, with node stop/kill/restart;
- :mod:`kafka_sink.testing.s3`: ``LocalS3``, an S3-compatible server (S3Proxy from Maven Central)
  whose filesystem backend shows stored objects as files;
- :mod:`kafka_sink.testing.oracle`: create topics and read records back with kafka-python;
- :mod:`kafka_sink.testing.proxy`: ``TcpProxy``, a TCP proxy that delays, pauses or cuts traffic;
- :mod:`kafka_sink.testing.probe`: a raw Metadata probe used for readiness checks.

This is the top layer: no other ``kafka_sink`` package imports it. Test-only dependencies
(kafka-python, testcontainers) are imported lazily, inside the functions that need them.
"""
