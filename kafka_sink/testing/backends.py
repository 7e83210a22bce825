"""Choosing the Kafka a test session talks to.

Order (``single_node_kafka``):

1. ``KAFKA_BOOTSTRAP_SERVERS`` set: that external Kafka, used as it is;
2. a Docker engine answers and the image (``KAFKA_TEST_IMAGE``, default
   ``confluentinc/cp-kafka:7.6.0``) is already present: testcontainers' Kafka in KRaft mode
   (these machines cannot pull images, so a missing image means "not available");
3. otherwise :class:`~kafka_sink.testing.local_kafka.LocalKafka` from the Maven jars.

``KAFKA_TEST_BACKEND=external|docker|local`` forces one of them. Multi-node tests always use
``LocalKafka`` because they stop and kill nodes. Docker and testcontainers are imported only after
the checks that make them usable: docker-py contacts the engine as soon as a client is built.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kafka_sink.testing.local_kafka import KafkaSetupError, LocalKafka

__all__ = ["DEFAULT_DOCKER_IMAGE", "docker_engine_available", "single_node_kafka"]

DEFAULT_DOCKER_IMAGE = "confluentinc/cp-kafka:7.6.0"
_BACKENDS = ("external", "docker", "local")


def docker_engine_available(image: str | None = None, timeout_s: float = 3.0) -> bool:
    """True when a Docker engine answers a ping and (if given) ``image`` is present locally."""
    try:
        import docker
    except ImportError:
        return False
    try:
        client = docker.from_env(timeout=timeout_s)
    except Exception:  # any failure to reach the engine means "no engine"
        return False
    try:
        if not client.ping():
            return False
        if image:
            client.images.get(image)
        return True
    except Exception:
        return False
    finally:
        client.close()


def _kafka_container_class() -> Any:
    try:
        from testcontainers.community.kafka import KafkaContainer
    except ImportError:
        from testcontainers.kafka import KafkaContainer
    return KafkaContainer


@contextmanager
def single_node_kafka() -> Iterator[tuple[str, str]]:
    """Yield ``(backend, bootstrap_servers)`` for a single-broker Kafka; stop it afterwards."""
    forced = os.environ.get("KAFKA_TEST_BACKEND", "").strip().lower()
    if forced and forced not in _BACKENDS:
        raise KafkaSetupError(f"KAFKA_TEST_BACKEND must be one of {_BACKENDS}, not {forced!r}")
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    if forced == "external" or (not forced and external):
        if not external:
            raise KafkaSetupError("KAFKA_TEST_BACKEND=external needs KAFKA_BOOTSTRAP_SERVERS")
        yield "external", external
        return
    image = os.environ.get("KAFKA_TEST_IMAGE", DEFAULT_DOCKER_IMAGE)
    if forced == "docker" or (not forced and docker_engine_available(image)):
        if forced == "docker" and not docker_engine_available(image):
            raise KafkaSetupError(f"KAFKA_TEST_BACKEND=docker but no engine or no image {image}")
        with _kafka_container_class()(image).with_kraft() as container:
            yield "docker", str(container.get_bootstrap_server())
        return
    with LocalKafka(nodes=1) as kafka:
        yield "local", kafka.bootstrap_servers
