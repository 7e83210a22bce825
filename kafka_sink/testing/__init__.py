"""Test tooling: a real local Kafka and Schema Registry, an oracle client, network fault tools.

- :class:`LocalKafka` (:mod:`kafka_sink.testing.local_kafka`): Apache Kafka (KRaft, 1 or 3 nodes)
  from the Maven Central jars, with node stop/kill/restart;
- :mod:`kafka_sink.testing.prerequisites`: the packaged broker templates, finding java and the
  jars, and :func:`fetch_kafka_jars` (``python -m kafka_sink.testing fetch``);
- :mod:`kafka_sink.testing.jvm`: the process hygiene of the JVM children (Kafka nodes, S3Proxy,
  the registry): free ports, a start in their own session, bounded readiness waits and stops,
  log tails;
- :class:`LocalSchemaRegistry` (:mod:`kafka_sink.testing.local_schema_registry`): a Schema
  Registry with Confluent's REST API (Apicurio Registry, in memory, built from Maven Central by
  ``python -m kafka_sink.testing fetch schema-registry``); ``.url`` is ``schema.registry.url``;
- :class:`LocalPushgateway` (:mod:`kafka_sink.testing.pushgateway`): a Prometheus Pushgateway
  (Debian's ``prometheus-pushgateway`` binary, ``python -m kafka_sink.testing fetch
  pushgateway``); ``.url`` is ``metricsPushGateway``, ``.metrics()`` what it holds;
- :mod:`kafka_sink.testing.s3`: ``LocalS3``, an S3-compatible server (S3Proxy from Maven Central)
  whose filesystem backend shows stored objects as files;
- :class:`LocalOidc` (:mod:`kafka_sink.testing.oidc`): an OAuth token endpoint and JWKS on
  127.0.0.1 issuing RS256 JWTs; ``LocalKafka(oauth=oidc.broker_listener())`` adds an OAUTHBEARER
  listener validating them;
- :mod:`kafka_sink.testing.oracle`: create topics and read records back with kafka-python;
- :mod:`kafka_sink.testing.proxy`: ``TcpProxy``, a TCP proxy that delays, pauses or cuts traffic;
- :mod:`kafka_sink.testing.probe`: a raw Metadata probe used for readiness checks;
- :mod:`kafka_sink.testing.plugins`: example serializers, interceptors and partitioners, importable
  by path on Spark executors.

This is the top layer: no other ``kafka_sink`` package imports it. Importing it loads only the
standard library; test-only dependencies (kafka-python, testcontainers) are imported lazily,
inside the functions that need them.
"""

from kafka_sink.testing.local_kafka import KafkaStartError, LocalKafka, OAuthListener
from kafka_sink.testing.local_schema_registry import (
    LocalSchemaRegistry,
    SchemaRegistrySetupError,
    SchemaRegistryStartError,
    fetch_schema_registry,
)
from kafka_sink.testing.oidc import LocalOidc
from kafka_sink.testing.prerequisites import (
    KafkaSetupError,
    default_jars_dir,
    fetch_kafka_jars,
    find_jars_dir,
)
from kafka_sink.testing.pushgateway import (
    LocalPushgateway,
    PushgatewaySetupError,
    PushgatewayStartError,
    fetch_pushgateway,
)

__all__ = [
    "KafkaSetupError",
    "KafkaStartError",
    "LocalKafka",
    "LocalOidc",
    "LocalPushgateway",
    "LocalSchemaRegistry",
    "OAuthListener",
    "PushgatewaySetupError",
    "PushgatewayStartError",
    "SchemaRegistrySetupError",
    "SchemaRegistryStartError",
    "default_jars_dir",
    "fetch_kafka_jars",
    "fetch_pushgateway",
    "fetch_schema_registry",
    "find_jars_dir",
]
