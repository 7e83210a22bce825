"""The driver's preflight: the cluster, the topic and the principal's rights, before any task.

Role: mistakes that would otherwise surface in every task after a minute of retries (bootstrap
servers where nothing answers, a topic that does not exist, a missing ACL) are found on the
driver while the write is planned, within option ``preflightTimeoutMs``, and refused with a
message that names what is wrong and how to fix it. ``datasource.py`` calls :func:`check_write`
before anything else talks to the cluster (so the exactly-once planning never waits on brokers
that do not answer), and :func:`check_transactional_ids` once an exactly-once write's prefix is
known. What is asked:

- the broker list (Metadata through the bootstrap servers): none within the bound fails naming
  the servers and the last network error;
- the ``topic`` option's topic (Metadata v8-v10, the versions that carry both the topic's and
  the cluster's authorized operations; never auto-creating it): missing, the brokers'
  ``auto.create.topics.enable`` decides (DescribeConfigs on one broker): off or unreadable fails
  naming the topic and that setting; on logs once per driver that the first write creates it
  with ``num.partitions`` and ``default.replication.factor``. Present without WRITE in its
  authorized operations (or hidden: TOPIC_AUTHORIZATION_FAILED) fails naming the ACL; with
  exactly-once, so does one without READ: the driver reads the topic's partitions for a
  transaction's COMMIT or ABORT marker when a commit is refused after its id moved on (without
  READ that outcome stays unknown and the batch cannot finish), and for what an aborted batch's
  unfinished tasks wrote;
- with ``onRecordError=deadLetter``, the ``deadLetterTopic`` option's topic the same way, in the
  same Metadata request (dead letters are written by the same producer and, exactly-once, in
  the same transaction as the good rows): each refusal names the option it came from;
- idempotence (at-least-once with ``enable.idempotence`` on): the brokers give a producer id to
  a principal with IDEMPOTENT_WRITE on the cluster or, since Kafka 3.0 (KIP-679), WRITE on any
  topic, prefixed ACLs included, which no listing shows. So when the cluster's authorized
  operations lack IDEMPOTENT_WRITE, one InitProducerId without a transactional id (what the
  producer sends first; it writes to no log) asks the broker's own rule;
- exactly-once: whether the cluster offers transactions at all, asked of the broker (never
  guessed from a preset or a host name): its ApiVersions answer must carry InitProducerId,
  AddPartitionsToTxn, EndTxn and FindCoordinator (a service such as Event Hubs offers them only
  on some tiers), and FindCoordinator for a transactional id must not be answered
  INVALID_REQUEST or UNSUPPORTED_VERSION; either refuses the write naming what is missing, the
  servers and (with option ``preset``) what the service documents;
- exactly-once: one transactional id of the prefix: FindCoordinator needs DESCRIBE on it, and
  EndTxn (abort) with no producer id needs WRITE and is then refused by the coordinator without
  touching any transaction (-1 is no producer's id). Its coordinator must speak
  DescribeTransactions and ListTransactions (Kafka 3.0+, KIP-664): the driver's commit checks
  its fence and the batch's transactions with the one and sweeps with the other, so without
  them a streaming query would fail at its first re-run or sweep; brokers before 3.0 are
  refused for exactly-once here, naming the missing API (a definite answer: the versions the
  broker announced when the connection opened).

A topic given per row (the ``topic`` column) cannot be checked up front. Each refusal names the
missing ACL and the ``kafka-acls`` command that grants it, for ``User:<sasl username>`` when the
config carries one, else a placeholder.

Invariants:
- Every step shares one deadline of ``preflightTimeoutMs``; the connections are closed before
  returning. Nothing is written to any topic or transaction (the idempotence probe only takes a
  producer id, as every idempotent producer's start does).
- Only a definite answer refuses a write: no broker answering at the bootstrap servers within
  the bound, or a broker answering that the topic is missing or a right is not granted. Once a
  broker answered, a check that cannot be made (an API the brokers do not speak, a broker whose
  advertised address cannot be reached, no answer in time) logs one warning and lets the write
  go on: a cluster with a broker down stays writable, and the tasks name an unreachable leader's
  partitions. Exception: a transaction coordinator without DescribeTransactions or
  ListTransactions refuses an exactly-once write (see above).
- A batch job is checked on every ``writer()`` call; a streaming query once per driver-side
  Python process and configuration (Spark builds the writer twice per micro-batch): a
  configuration that passed is not asked again. A batch job's transactional ids are the
  exception: a pass stands for ``TRANSACTIONAL_CHECK_MAX_AGE_MS`` (5 minutes) for the same
  configuration and prefix in that process, all generated default prefixes counting as one (a
  job's default prefix is new with every job, so only a prefixed or wildcard ACL can grant it,
  and the next job's ids match it as well). The check is a round of its own (a connection,
  FindCoordinator, an EndTxn probe) on the path of every job; an ACL revoked within the
  5 minutes is found by the tasks' InitProducerId instead.
- Messages never carry a password (the config's secrets stay in the admin client).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from kafka_sink.admin.client import AdminClient, AdminConfig, Deadline
from kafka_sink.clock import SYSTEM_CLOCK, Clock
from kafka_sink.errors import (
    AuthenticationError,
    ClusterAuthorizationFailedError,
    InvalidRequestError,
    KafkaError,
    KafkaTimeoutError,
    TransactionalIdAuthorizationFailedError,
    UnsupportedVersionError,
    error_for_code,
)
from kafka_sink.net.oauth.login import OAuthBearerLogin, release_login
from kafka_sink.net.oauth.token import TokenSourceError
from kafka_sink.net.presets import PRESETS
from kafka_sink.sink_errors import SinkOptionError
from kafka_sink.spark.logs import ensure_logging, first_on_driver, logger
from kafka_sink.wire.api import ApiKey
from kafka_sink.wire.messages import EndTxnRequest, InitProducerIdRequest, MetadataRequest
from kafka_sink.wire.messages.metadata import INT32_MIN, MetadataResponse

__all__ = ["ClientFactory", "check_transactional_ids", "check_write"]

ClientFactory = Callable[[Mapping[str, object]], tuple[AdminClient, AdminConfig]]

# What an exactly-once write sends (the producer's InitProducerId, AddPartitionsToTxn and
# EndTxn; FindCoordinator for the transaction coordinator), spelled as Kafka's protocol guide.
_TRANSACTION_APIS = (
    ApiKey.INIT_PRODUCER_ID,
    ApiKey.ADD_PARTITIONS_TO_TXN,
    ApiKey.END_TXN,
    ApiKey.FIND_COORDINATOR,
)
_API_NAMES = {
    ApiKey.INIT_PRODUCER_ID: "InitProducerId",
    ApiKey.ADD_PARTITIONS_TO_TXN: "AddPartitionsToTxn",
    ApiKey.END_TXN: "EndTxn",
    ApiKey.FIND_COORDINATOR: "FindCoordinator",
}

# Kafka's AclOperation codes: bit (1 << code) of an authorized-operations field.
_ALL, _READ, _WRITE, _IDEMPOTENT_WRITE = 2, 3, 4, 12
# The Metadata versions carrying the cluster's authorized operations (moved to
# DescribeCluster from v11).
_METADATA_AUTHORIZED_OPS = (8, 10)
_UNKNOWN_TOPIC_OR_PARTITION = 3
_TOPIC_AUTHORIZATION_FAILED = 29
_AUTO_CREATE = "auto.create.topics.enable"
_CREATE_DEFAULTS = ("num.partitions", "default.replication.factor")

# Configurations (hashed) a streaming query's preflight passed in this process.
_PASSED: set[str] = set()
#: How long a batch job's passed transactional-id check stands for the next jobs of the process.
TRANSACTIONAL_CHECK_MAX_AGE_MS = 300_000
# Batch jobs' transactional-id checks (hashed) that passed, by when (monotonic ms).
_TRANSACTIONAL_PASSED_MS: dict[str, int] = {}


def check_write(
    producer_config: Mapping[str, str],
    *,
    topic: str | None,
    timeout_ms: int,
    idempotent: bool,
    streaming: bool,
    exactly_once: bool = False,
    preset: str | None = None,
    dead_letter_topic: str | None = None,
    client_factory: ClientFactory = AdminClient.from_config,
) -> None:
    """Refuse, before any task, a write the cluster cannot take (see the module docstring).

    ``exactly_once``: the cluster must offer transactions, and the topics must be readable too
    (READ), for the driver's marker reads; ``preset`` (the sink's option) only adds the
    service's own words to the transactions refusal; ``dead_letter_topic`` (option
    ``deadLetterTopic``) is checked as ``topic`` is.
    """
    key = _key(
        "write", producer_config, topic, str(idempotent), str(exactly_once), dead_letter_topic
    )
    if streaming and key in _PASSED:
        return
    with _session(producer_config, timeout_ms, client_factory) as (client, cfg, deadline):
        _brokers(client, cfg, deadline)
        named = [
            (name, option)
            for name, option in ((topic, "topic"), (dead_letter_topic, "deadLetterTopic"))
            if name is not None
        ]
        node, response = _metadata(client, [name for name, _option in named], deadline)
        if exactly_once:
            _check_transactions_offered(client, cfg, node, deadline, preset)
        for name, option in named:
            _check_topic(
                client,
                cfg,
                node=node,
                topic=name,
                option=option,
                response=response,
                deadline=deadline,
                read=exactly_once,
            )
        if idempotent and not _allows(response.cluster_authorized_operations, _IDEMPOTENT_WRITE):
            _check_idempotent_write(client, cfg, node, topic, deadline)
    if streaming:
        _PASSED.add(key)


def check_transactional_ids(
    producer_config: Mapping[str, str],
    *,
    prefix: str,
    transactional_id: str,
    timeout_ms: int,
    streaming: bool,
    generated_prefix: bool = False,
    client_factory: ClientFactory = AdminClient.from_config,
    clock: Clock = SYSTEM_CLOCK,
) -> None:
    """Refuse an exactly-once write whose principal may not use the prefix's transactional ids.

    ``transactional_id`` is one of the ids the write's tasks will use. ``generated_prefix``: the
    prefix is the sink's default for a batch job (new with every job), so a pass for an earlier
    generated prefix stands for it (see the module docstring).
    """
    key = _key("transactional", producer_config, None if generated_prefix else prefix)
    if streaming and key in _PASSED:
        return
    now_ms = clock.now_ms()
    if not streaming:
        passed_ms = _TRANSACTIONAL_PASSED_MS.get(key)
        if passed_ms is not None and now_ms - passed_ms < TRANSACTIONAL_CHECK_MAX_AGE_MS:
            return
    with _session(producer_config, timeout_ms, client_factory) as (client, cfg, deadline):
        _brokers(client, cfg, deadline)
        try:
            try:
                coordinator = client.find_coordinator(transactional_id, deadline)
            except (InvalidRequestError, UnsupportedVersionError) as exc:
                raise SinkOptionError(
                    _no_transactions_message(
                        cfg,
                        f"FindCoordinator for transactional id {transactional_id!r} is "
                        f"answered {type(exc).__name__}: {exc}",
                        None,
                    )
                ) from None
            _check_transaction_apis(client, coordinator, transactional_id, deadline)
            deadline.waiting_for = f"the rights on transactional id {transactional_id!r}"
            probe = EndTxnRequest(
                transactional_id=transactional_id,
                producer_id=-1,
                producer_epoch=-1,
                committed=False,
            )
            answer = client.request(coordinator, probe, deadline)
            error = error_for_code(answer.error_code)
            if isinstance(error, TransactionalIdAuthorizationFailedError):
                raise error
        except TransactionalIdAuthorizationFailedError:
            raise SinkOptionError(_transactional_message(cfg, prefix)) from None
    if streaming:
        _PASSED.add(key)
    else:
        _TRANSACTIONAL_PASSED_MS[key] = now_ms


# -- the steps ----------------------------------------------------------------------------------


@contextmanager
def _session(
    producer_config: Mapping[str, str], timeout_ms: int, client_factory: ClientFactory
) -> Iterator[tuple[AdminClient, AdminConfig, Deadline]]:
    """An admin client and the preflight's deadline; its failures become the sink's errors.

    With OAUTHBEARER a token is had first, through the process's login for the write's settings
    (the one the admin client then shares): a token source that cannot give one fails here,
    naming it, before any broker is asked.
    """
    with _token_first(producer_config) as token_source:
        client, cfg = client_factory(producer_config)
        servers = ",".join(cfg.bootstrap_servers)
        deadline = Deadline(client.clock, timeout_ms, "the preflight")
        try:
            yield client, cfg, deadline
        except AuthenticationError as exc:
            came_from = ""
            if token_source is not None:
                # The mechanism's error usually names the source already: said once.
                source = "" if token_source in str(exc) else f"the token came from {token_source}: "
                came_from = (
                    f" ({source}check that the token source issues tokens for the audience, "
                    "scope and issuer the brokers expect)"
                )
            raise SinkOptionError(
                f"the brokers at kafka.bootstrap.servers={servers} refused this client's "
                f"authentication: {exc}{came_from}. Fix: check the kafka.sasl.* / kafka.ssl.* "
                "options and the credentials"
            ) from None
        except SinkOptionError:
            raise
        except KafkaError as exc:
            # A broker answered, so the servers are right, but a check could not be made (an
            # API the brokers do not speak, a broker whose advertised address cannot be reached,
            # no answer in time): refusing could block a write that works (a cluster with one
            # broker down), and the tasks report an unreachable leader naming its partitions.
            ensure_logging()
            logger.warning(
                "pykafka: the check of the cluster before the write stopped early, the write "
                "goes on unchecked: %s",
                exc,
            )
        finally:
            client.close()


@contextmanager
def _token_first(producer_config: Mapping[str, str]) -> Iterator[str | None]:
    """With OAUTHBEARER, hold the process's login for the write's settings and have a token
    (yields where tokens come from); otherwise yields None. A failure is refused naming the
    token source, never a secret."""
    sasl = AdminConfig.from_mapping(producer_config).network_config("pykafka-preflight")
    if not sasl.uses_sasl or (sasl.sasl_mechanism or "").upper() != "OAUTHBEARER":
        yield None
        return
    holder = sasl.sasl_config()
    login = holder.oauth if holder is not None else None
    if not isinstance(login, OAuthBearerLogin):
        yield None
        return
    try:
        try:
            login.token()
        except TokenSourceError as exc:
            # A source's error names it; one that does not is named here.
            where = "" if login.describe() in str(exc) else f" from {login.describe()}"
            raise SinkOptionError(
                f"kafka.sasl.mechanism=OAUTHBEARER: the driver got no token{where}: {exc}. "
                "Fix: check the kafka.sasl.oauthbearer.* options "
                "(the endpoint or provider, the client id and secret, the scope) and that the "
                "driver can reach the endpoint; executors need the same"
            ) from None
        yield login.describe()
    finally:
        release_login(login)


def _check_transaction_apis(
    client: AdminClient, node: int, transactional_id: str, deadline: Deadline
) -> None:
    """Refuse exactly-once on a coordinator without DescribeTransactions / ListTransactions."""
    for api, name in (
        (ApiKey.DESCRIBE_TRANSACTIONS, "DescribeTransactions"),
        (ApiKey.LIST_TRANSACTIONS, "ListTransactions"),
    ):
        try:
            client.api_version(node, api, deadline)
        except UnsupportedVersionError:
            raise SinkOptionError(
                f"deliveryGuarantee=exactly-once needs the brokers' {name} API (Kafka 3.0 or "
                f"later, KIP-664), which broker {node}, the transaction coordinator of "
                f"{transactional_id!r}, does not support: the driver checks each batch's "
                "transactions and its fence with DescribeTransactions and ends leftover "
                "transactions found with ListTransactions. Fix: upgrade the brokers to Kafka "
                "3.0 or later, or write with deliveryGuarantee=at-least-once"
            ) from None


def _brokers(client: AdminClient, cfg: AdminConfig, deadline: Deadline) -> None:
    """Wait for the broker list: the one wait whose end means that no broker answered."""
    try:
        client.brokers(deadline)
    except KafkaTimeoutError as exc:
        if not deadline.is_own(exc):
            raise
        last = deadline.last_error or "none (no connection completed)"
        raise SinkOptionError(
            f"no broker answered at kafka.bootstrap.servers={','.join(cfg.bootstrap_servers)} "
            f"within {deadline.timeout_ms} ms (option 'preflightTimeoutMs'); last network "
            f"error: {last}. Fix: check the host names and ports, that the brokers run and that "
            "this driver can reach them (kafka.security.protocol must match the listener), or "
            "raise preflightTimeoutMs"
        ) from None


def _metadata(
    client: AdminClient, topics: list[str], deadline: Deadline
) -> tuple[int, MetadataResponse]:
    """The topics' (or no topic's) metadata with the authorized operations, and which broker
    answered it."""
    request = MetadataRequest.for_topics(topics)
    request.allow_auto_topic_creation = False
    request.include_topic_authorized_operations = True
    request.include_cluster_authorized_operations = True

    def attempt() -> tuple[int, MetadataResponse]:
        # Asked anew each attempt: a broker that cannot be reached is not asked twice in a row.
        brokers = client.brokers(deadline)
        node = client.network.least_loaded_node(client.clock.now_ms())
        node = brokers[0] if node is None else node
        deadline.waiting_for = f"the metadata of broker {node} (topic, rights)"
        negotiated = client.api_version(node, ApiKey.METADATA, deadline)
        low, high = _METADATA_AUTHORIZED_OPS
        version = min(negotiated, high) if negotiated >= low else negotiated
        response: MetadataResponse = client.request(node, request, deadline, version=version)
        return node, response

    return client.retrying(deadline, attempt)


def _check_topic(
    client: AdminClient,
    cfg: AdminConfig,
    *,
    node: int,
    topic: str,
    response: MetadataResponse,
    deadline: Deadline,
    option: str = "topic",
    read: bool = False,
) -> None:
    """Refuse a missing or unwritable topic (with ``read``, an unreadable one too), naming the
    ``option`` that gave it."""
    entry = next((t for t in response.topics if t.name == topic), None)
    if entry is None or entry.error_code == _UNKNOWN_TOPIC_OR_PARTITION:
        _missing_topic(client, cfg, node, topic, deadline, option=option)
        return
    if entry.error_code == _TOPIC_AUTHORIZATION_FAILED or not _allows(
        entry.topic_authorized_operations, _WRITE, unknown=True
    ):
        raise SinkOptionError(
            f"the principal {_principal(cfg)} may not write to topic '{topic}' (option "
            f"'{option}'): it lacks the WRITE ACL on the topic (TOPIC_AUTHORIZATION_FAILED). Fix: "
            + _acl_command(cfg, f"--operation Write --topic {topic}")
        )
    if read and not _allows(entry.topic_authorized_operations, _READ, unknown=True):
        raise SinkOptionError(
            f"deliveryGuarantee=exactly-once: the principal {_principal(cfg)} may not read "
            f"topic '{topic}' (option '{option}'): it lacks the READ ACL on the topic. The driver "
            "reads the topic's partitions for a transaction's COMMIT or ABORT marker when a "
            "commit is refused after its transactional id moved on (without READ that batch "
            "cannot be finished, and its query cannot go on), and for what an aborted batch's "
            "unfinished tasks wrote. Fix: " + _acl_command(cfg, f"--operation Read --topic {topic}")
        )


def _missing_topic(
    client: AdminClient,
    cfg: AdminConfig,
    node: int,
    topic: str,
    deadline: Deadline,
    *,
    option: str,
) -> None:
    try:
        configs = client.broker_configs(node, [_AUTO_CREATE, *_CREATE_DEFAULTS], deadline)
    except KafkaError as exc:
        if isinstance(exc, KafkaTimeoutError) and deadline.is_own(exc):
            raise
        configs = {}
    auto_create = (configs.get(_AUTO_CREATE) or "unknown").lower()
    if auto_create == "true":
        defaults = ", ".join(f"{k}={configs.get(k) or 'unknown'}" for k in _CREATE_DEFAULTS)
        servers = ",".join(cfg.bootstrap_servers)
        if first_on_driver("auto-create", f"{servers}/{topic}"):
            ensure_logging()
            logger.info(
                "pykafka: topic '%s' does not exist; the brokers create it on the first write "
                "with their defaults (%s)",
                topic,
                defaults,
            )
        return
    raise SinkOptionError(
        f"topic '{topic}' (option '{option}') does not exist on the cluster at "
        f"kafka.bootstrap.servers={','.join(cfg.bootstrap_servers)}, and the brokers do not "
        f"create topics on first use ({_AUTO_CREATE}={auto_create}). Fix: create it (kafka-topics "
        f"--bootstrap-server {','.join(cfg.bootstrap_servers)} --create --topic {topic}), or "
        "correct the name"
    )


def _check_transactions_offered(
    client: AdminClient, cfg: AdminConfig, node: int, deadline: Deadline, preset: str | None
) -> None:
    """Refuse an exactly-once write to brokers whose ApiVersions lack the transaction APIs."""
    deadline.waiting_for = f"the API versions of broker {node} (transactions)"
    missing = []
    for api in _TRANSACTION_APIS:
        try:
            client.api_version(node, api, deadline)
        except UnsupportedVersionError:
            missing.append(_API_NAMES[api])
    if missing:
        reason = (
            f"broker {node} answers ApiVersions without {', '.join(missing)}, which Kafka "
            "transactions need"
        )
        raise SinkOptionError(_no_transactions_message(cfg, reason, preset))


def _check_idempotent_write(
    client: AdminClient,
    cfg: AdminConfig,
    node: int,
    topic: str | None,
    deadline: Deadline,
) -> None:
    """Ask the broker for a producer id as the idempotent producer will (see the docstring)."""
    deadline.waiting_for = "a producer id (the idempotent producer's right)"

    def attempt() -> None:
        answer = client.request(node, InitProducerIdRequest(transactional_id=None), deadline)
        error = error_for_code(answer.error_code, None)
        if isinstance(error, ClusterAuthorizationFailedError):
            raise error

    try:
        client.retrying(deadline, attempt)
    except ClusterAuthorizationFailedError:
        where = f"topic '{topic}'" if topic else "the topics it writes"
        raise SinkOptionError(
            f"the principal {_principal(cfg)} may not use the idempotent producer "
            "(kafka.enable.idempotence, on by default): the brokers refuse it a producer id "
            "(CLUSTER_AUTHORIZATION_FAILED). It needs the IDEMPOTENT_WRITE ACL on the cluster "
            f"(or, on Kafka 3.0+, WRITE on {where}). Fix: "
            + _acl_command(cfg, "--operation IdempotentWrite --cluster")
            + "; or set kafka.enable.idempotence=false"
        ) from None


# -- messages -----------------------------------------------------------------------------------


def _allows(ops: int, operation: int, *, unknown: bool = False) -> bool:
    """Whether an authorized-operations field grants ``operation`` (``unknown`` when absent)."""
    if ops == INT32_MIN:
        return unknown
    return bool(ops & (1 << operation) or ops & (1 << _ALL))


def _principal(cfg: AdminConfig) -> str:
    if cfg.uses_sasl and cfg.sasl_username:
        return f"User:{cfg.sasl_username}"
    return "User:<principal>"


def _acl_command(cfg: AdminConfig, what: str) -> str:
    servers = ",".join(cfg.bootstrap_servers)
    admin = "" if cfg.security_protocol == "PLAINTEXT" else " --command-config <admin.properties>"
    return (
        f"an administrator runs: kafka-acls --bootstrap-server {servers}{admin} --add "
        f"--allow-principal {_principal(cfg)} {what}"
    )


def _no_transactions_message(cfg: AdminConfig, reason: str, preset: str | None) -> str:
    servers = ",".join(cfg.bootstrap_servers)
    note = ""
    if preset is not None:
        found = PRESETS.get(preset)
        if found is not None and found.transactions_note:
            note = f" ({found.transactions_note})"
    return (
        f"deliveryGuarantee=exactly-once needs Kafka transactions, but the cluster at "
        f"kafka.bootstrap.servers={servers} does not offer them: {reason}{note}. Fix: use "
        "deliveryGuarantee=at-least-once (the default), or a cluster or service tier with "
        "transactions"
    )


def _transactional_message(cfg: AdminConfig, prefix: str) -> str:
    return (
        f"deliveryGuarantee=exactly-once: the principal {_principal(cfg)} may not use the "
        f"transactional ids '{prefix}-*' (TRANSACTIONAL_ID_AUTHORIZATION_FAILED): each task "
        "needs the WRITE and DESCRIBE ACLs on its transactional id. Fix: "
        + _acl_command(
            cfg,
            "--operation Write --operation Describe --transactional-id "
            f"{prefix} --resource-pattern-type prefixed",
        )
        + "; or set option 'transactionalIdPrefix' to a prefix the principal is granted"
    )


def _key(kind: str, producer_config: Mapping[str, str], *parts: str | None) -> str:
    """A digest of what a check depends on (the config may hold secrets: never kept as is)."""
    text = repr((kind, sorted(producer_config.items()), parts))
    return hashlib.sha256(text.encode()).hexdigest()
