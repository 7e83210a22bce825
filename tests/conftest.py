"""Shared fixtures: a real Kafka for the session, unique topics, and broker/cluster markers.

- ``kafka_bootstrap`` (session): bootstrap servers of a single-broker Kafka, started on first use
  (``KAFKA_BOOTSTRAP_SERVERS``, else testcontainers when Docker and the image are present, else a
  ``LocalKafka`` from the Maven jars; see ``kafka_sink.testing.backends``).
- ``kafka_cluster`` (session): a 3-node ``LocalKafka``, started only if a test asks for it.
- ``topic_factory`` / ``cluster_topic_factory``: ``(partitions=1, replication_factor=1,
  configs=None) -> name`` creates a topic with a unique name and waits for its leaders.
- ``proxied_kafka`` (module): a single-node Kafka of the module's own (automatic topic creation
  off), its node also behind a TCP proxy the test can slow, pause, hold or cut; ``proxied`` is the
  same Kafka with its proxy forwarding normally again after each test, whatever the test did.
- ``schema_registry`` (session): a ``LocalSchemaRegistry`` (Apicurio Registry in memory, built by
  ``make setup``), started only if a test asks for it; tests share it, so they use subjects of
  their own (``subject_factory``).
- ``pushgateway`` (session): a ``LocalPushgateway`` (Debian's Prometheus Pushgateway binary,
  fetched by ``make setup``), started only if a test asks for it.

The tests inject their pauses and unreadable markers through the environment
(``tests/fault_site/fault_env.py``; the package reads no test variable): at start this installs
them in the pytest process and puts ``tests/fault_site`` first on ``PYTHONPATH``, so every
process the tests start (child drivers, Spark's JVM and its Python workers) installs them too.

A Kafka or registry that cannot start fails the test (never skips it): a suite that silently
ran no broker test must not look green. Tests using these fixtures are marked ``broker`` (and
``cluster`` for the 3-node one) automatically, as is everything under ``tests/broker`` and
``tests/spark`` (and ``spark`` there), so ``-m "not broker"`` runs the pure unit tests without
decorating every test.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TypeVar

import pytest

from kafka_sink.testing.backends import single_node_kafka
from kafka_sink.testing.local_kafka import KafkaSetupError, KafkaStartError, LocalKafka
from kafka_sink.testing.local_schema_registry import LocalSchemaRegistry, SchemaRegistryStartError
from kafka_sink.testing.oidc import LocalOidc
from kafka_sink.testing.oracle import create_topic, import_kafka_python
from kafka_sink.testing.pushgateway import LocalPushgateway, PushgatewayStartError
from tests.fault_site import fault_env

# Imported once here, with its import-time DeprecationWarnings silenced (see the oracle), so tests
# can use `from kafka import ...` under filterwarnings=error. Without it (no dev extras) the unit
# tests still run; broker tests then fail on their first use of the oracle.
with contextlib.suppress(ImportError):
    import_kafka_python()

TopicFactory = Callable[..., str]

# The registry is a real service too: `-m "not broker"` leaves its tests out.
_BROKER_FIXTURES = {
    "kafka_bootstrap",
    "topic_factory",
    "proxied_kafka",
    "schema_registry",
    "pushgateway",
    "oidc",
    "oauth_kafka",
}
_CLUSTER_FIXTURES = {"kafka_cluster", "cluster_topic_factory"}


_TESTS_DIR = Path(__file__).resolve().parent
_FAULT_SITE = _TESTS_DIR / "fault_site"


def pytest_configure(config: pytest.Config) -> None:
    # Before any test starts a process (Spark's JVM inherits the environment at its launch).
    fault_env.install()
    path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(_FAULT_SITE) not in path:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(_FAULT_SITE), *path])


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        try:
            area = item.path.resolve().relative_to(_TESTS_DIR).parts[0]
        except ValueError:
            area = ""
        if names & _CLUSTER_FIXTURES:
            item.add_marker(pytest.mark.cluster)
        # Everything under tests/broker and tests/spark needs a real Kafka, fixture or not.
        if names & (_CLUSTER_FIXTURES | _BROKER_FIXTURES) or area in ("broker", "spark"):
            item.add_marker(pytest.mark.broker)
            if area == "unit":
                # tests/unit runs on a fresh clone with no jars (`make test-unit`, bare
                # `pytest tests/unit`): what needs a broker or a server fixture lives elsewhere.
                raise pytest.UsageError(
                    f"{item.nodeid} needs a server fixture "
                    f"({sorted(names & (_CLUSTER_FIXTURES | _BROKER_FIXTURES))}): move it to "
                    "tests/broker (tests/unit needs no broker and no jars)"
                )
        if area == "spark":
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    try:
        backend = single_node_kafka()
        _, bootstrap = backend.__enter__()
    except (KafkaSetupError, KafkaStartError) as exc:
        pytest.fail(f"no Kafka broker for the tests: {exc}", pytrace=False)
    try:
        yield bootstrap
    finally:
        backend.__exit__(None, None, None)


_S = TypeVar("_S", LocalKafka, LocalSchemaRegistry, LocalPushgateway, LocalOidc)


def running(service: _S, what: str) -> Iterator[_S]:
    """For a fixture to ``yield from``: ``service`` started, then closed after its last test; one
    that cannot start fails the test naming ``what`` (never skips it)."""
    try:
        service.start()
    except (
        KafkaSetupError,
        KafkaStartError,
        SchemaRegistryStartError,
        PushgatewayStartError,
    ) as exc:
        service.close()
        pytest.fail(f"no {what} for the tests: {exc}", pytrace=False)
    try:
        yield service
    finally:
        service.close()


@pytest.fixture(scope="session")
def kafka_cluster() -> Iterator[LocalKafka]:
    # Proxied: tests can also cut a single node off from clients (direct listeners stay too).
    yield from running(LocalKafka(nodes=3, proxied=True), "3-node Kafka cluster")


@pytest.fixture(scope="module")
def proxied_kafka() -> Iterator[LocalKafka]:
    # A module's own: its tests cut and pause the only node, which the session's Kafka must
    # never see.
    config = {"auto.create.topics.enable": "false"}
    yield from running(LocalKafka(nodes=1, proxied=True, broker_config=config), "proxied Kafka")


@pytest.fixture
def proxied(proxied_kafka: LocalKafka) -> Iterator[LocalKafka]:
    yield proxied_kafka
    # A test that failed half-way must not leave the next one a slow, paused or refusing proxy.
    for node_id in proxied_kafka.node_ids:
        proxy = proxied_kafka.proxy(node_id)
        proxy.refuse_new = False
        proxy.delay_ms = 0
        proxy.resume()


#: The OAuth client the session's token endpoint knows, and its secret.
OAUTH_CLIENT = ("pykafka-tests", "tests-client-secret")


@pytest.fixture(scope="session")
def oidc() -> Iterator[LocalOidc]:
    """A token endpoint + JWKS on 127.0.0.1 issuing RS256 tokens (aud ``kafka``, one hour)."""
    yield from running(LocalOidc({OAUTH_CLIENT[0]: OAUTH_CLIENT[1]}), "OIDC token endpoint")


@pytest.fixture(scope="session")
def oauth_kafka(oidc: LocalOidc) -> Iterator[LocalKafka]:
    """A Kafka whose ``.oauth_bootstrap_servers`` take OAUTHBEARER tokens of ``oidc``."""
    yield from running(LocalKafka(oauth=oidc.broker_listener()), "Kafka with OAUTHBEARER")


@pytest.fixture(scope="session")
def schema_registry() -> Iterator[LocalSchemaRegistry]:
    yield from running(LocalSchemaRegistry(), "Schema Registry")


@pytest.fixture(scope="session")
def pushgateway() -> Iterator[LocalPushgateway]:
    yield from running(LocalPushgateway(), "Prometheus Pushgateway")


@pytest.fixture
def subject_factory(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """``(suffix) -> subject``: a subject no other test uses, ending in ``suffix``."""
    return lambda suffix: f"{_unique_name(request)}-{suffix}"


def _unique_name(request: pytest.FixtureRequest) -> str:
    # Legal topic characters only, short enough for Kafka's 249-character limit.
    base = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name).strip("-.")[:80] or "t"
    return f"{base}-{uuid.uuid4().hex[:10]}"


def _factory(bootstrap: str, request: pytest.FixtureRequest) -> TopicFactory:
    def make(
        partitions: int = 1,
        replication_factor: int = 1,
        configs: Mapping[str, str] | None = None,
    ) -> str:
        name = _unique_name(request)
        create_topic(bootstrap, name, partitions, replication_factor, configs)
        return name

    return make


@pytest.fixture
def topic_factory(kafka_bootstrap: str, request: pytest.FixtureRequest) -> TopicFactory:
    return _factory(kafka_bootstrap, request)


@pytest.fixture
def cluster_topic_factory(
    kafka_cluster: LocalKafka, request: pytest.FixtureRequest
) -> TopicFactory:
    return _factory(kafka_cluster.bootstrap_servers, request)


@pytest.fixture(autouse=True)
def _whole_cluster(request: pytest.FixtureRequest) -> None:
    # The cluster is shared by the session and tests stop and kill nodes: every test that uses
    # it starts with all three nodes up.
    if "kafka_cluster" not in request.fixturenames:
        return
    cluster: LocalKafka = request.getfixturevalue("kafka_cluster")
    down = [i for i in cluster.node_ids if i not in cluster.running_node_ids]
    for node_id in down:
        cluster.start_node(node_id, wait=False)
    if down:
        cluster.wait_ready()
