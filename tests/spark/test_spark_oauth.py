"""The sink through a broker that takes OAUTHBEARER only, with tokens from a real token endpoint
(``kafka_sink.testing.oidc``: RS256 JWTs, client credentials; the broker validates them against
the endpoint's JWKS), with the options of README's self-run OIDC recipe.

- Batch and streaming writes, at-least-once and exactly-once, read back by an independent
  consumer (kafka-python) on the broker's second, PLAINTEXT listener: every row, and with
  exactly-once every row once (read_committed). README's Event Hubs Entra ID recipe (app secret)
  writes a batch through the same listener, asking the namespace's ``.default`` scope.
- A wrong client secret, a wrong audience and an unreachable token endpoint are refused on the
  driver in seconds, before any task runs, naming the endpoint; the secret appears in no error
  and no output.
- (slow) Tokens of 20 s and a broker session lifetime of 15 s (``connections.max.reauth.ms``): a
  streaming exactly-once query runs through more than five token lifetimes with idle gaps, every
  row once and no failed or retried task (Spark's status tracker); with the token endpoint down
  for one lifetime it recovers once the endpoint is back, every row once, or fails naming the
  endpoint and not the secret, with every row of the batches committed before it read once
  (never a silent stall). Which of the two happened is recorded as the test's ``outcome``.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sparkutil import id_stream, write_available_now

from kafka_sink.testing.local_kafka import LocalKafka
from kafka_sink.testing.oidc import LocalOidc
from kafka_sink.testing.oracle import create_topic, read_all
from tests.conftest import OAUTH_CLIENT, running
from tests.readme_recipes import recipe_options, recipe_run_options

RECIPE = "A self-run cluster with an OIDC provider"
SECRET_FOR_REFUSALS = "refused-secret-Zq81"


def recipe(
    kafka: LocalKafka,
    oidc: LocalOidc,
    topic: str,
    *,
    client: tuple[str, str] = OAUTH_CLIENT,
    endpoint: str | None = None,
) -> dict[str, str]:
    """README's recipe, with this machine's broker, endpoint and client put in."""
    options = {key: value for key, value in recipe_options(RECIPE) if value is not None}
    options.update(
        {
            "kafka.bootstrap.servers": kafka.oauth_bootstrap_servers,
            # The test listener is SASL without TLS; the recipe's SASL_SSL needs a certificate.
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.oauthbearer.token.endpoint.url": endpoint or oidc.token_endpoint_url,
            "kafka.sasl.oauthbearer.client.credentials.client.id": client[0],
            "kafka.sasl.oauthbearer.client.credentials.client.secret": client[1],
            "topic": topic,
        }
    )
    return options


def _topic(kafka: LocalKafka, name: str, partitions: int = 2) -> str:
    create_topic(kafka.bootstrap_servers, name, partitions, 1)
    return name


def _unique(prefix: str) -> str:
    return f"{prefix}-{time.monotonic_ns() % 10**10}"


@pytest.mark.parametrize(
    "case",
    ["batch/at-least-once", "batch/exactly-once", "stream/at-least-once", "stream/exactly-once"],
)
def test_writes_through_oauthbearer_are_read_back(
    spark: Any, oauth_kafka: LocalKafka, oidc: LocalOidc, tmp_path: Path, case: str
) -> None:
    mode, guarantee = case.split("/")
    topic = _topic(oauth_kafka, _unique(f"oauth-{mode}-{guarantee}"))
    options = {**recipe(oauth_kafka, oidc, topic), "deliveryGuarantee": guarantee}
    total = 600
    if mode == "batch":
        df = spark.range(total).selectExpr("CAST(id AS STRING) AS value")
        df.write.format("pykafka").mode("append").options(**options).save()
    else:
        stream = id_stream(spark, tmp_path / "in", {"a": range(300), "b": range(300, total)})
        write_available_now(
            stream.selectExpr("CAST(id AS STRING) AS value"), options, tmp_path / "cp"
        )
    isolation = "read_committed" if guarantee == "exactly-once" else "read_uncommitted"
    records = read_all(
        oauth_kafka.bootstrap_servers, topic, expected=total, isolation_level=isolation
    )
    counts = Counter(int(r.value) for r in records)
    assert set(counts) == set(range(total))
    if guarantee == "exactly-once":
        assert all(c == 1 for c in counts.values())


def test_the_event_hubs_entra_id_recipe_writes_a_batch(
    spark: Any, oauth_kafka: LocalKafka, oidc: LocalOidc
) -> None:
    # README's Entra ID recipe (app-registration form) as a Spark write: the event-hubs preset
    # applied by the sink on the driver and in the executors, the namespace's scope asked.
    options = recipe_run_options(
        "Azure Event Hubs with Entra ID",
        {
            "kafka.bootstrap.servers": oauth_kafka.oauth_bootstrap_servers,
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.oauthbearer.token.endpoint.url": oidc.token_endpoint_url,
            "kafka.sasl.oauthbearer.client.credentials.client.id": OAUTH_CLIENT[0],
            "kafka.sasl.oauthbearer.client.credentials.client.secret": OAUTH_CLIENT[1],
        },
    )
    # The recipe's topic, made unique to this run (the broker is the session's).
    options["topic"] = _topic(oauth_kafka, _unique(options["topic"]))
    asked = len(oidc.requests)
    df = spark.range(200).selectExpr("CAST(id AS STRING) AS value")
    df.write.format("pykafka").mode("append").options(**options).save()
    assert {r.scope for r in oidc.requests[asked:]} == {"https://127.0.0.1/.default"}
    records = read_all(oauth_kafka.bootstrap_servers, options["topic"], expected=200)
    assert sorted(int(r.value) for r in records) == list(range(200))


def _refused(spark: Any, options: dict[str, str], capfd: pytest.CaptureFixture[str]) -> str:
    df = spark.range(10).selectExpr("CAST(id AS STRING) AS value")
    start = time.monotonic()
    with pytest.raises(Exception) as refused:
        df.write.format("pykafka").mode("append").options(**options).save()
    elapsed = time.monotonic() - start
    message = str(refused.value)
    out, err = capfd.readouterr()
    assert elapsed < 30, f"refused after {elapsed:.1f} s"
    for text in (message, out, err):
        assert SECRET_FOR_REFUSALS not in text
    return message


def test_a_wrong_secret_is_refused_in_seconds_naming_the_endpoint(
    spark: Any, oauth_kafka: LocalKafka, oidc: LocalOidc, capfd: pytest.CaptureFixture[str]
) -> None:
    topic = _topic(oauth_kafka, _unique("oauth-wrong-secret"))
    options = recipe(oauth_kafka, oidc, topic, client=(OAUTH_CLIENT[0], SECRET_FOR_REFUSALS))
    message = _refused(spark, options, capfd)
    assert oidc.token_endpoint_url in message
    assert "401" in message or "invalid_client" in message
    assert read_all(oauth_kafka.bootstrap_servers, topic) == []


@pytest.mark.slow  # waits out the login's retry budget (10 s); CI runs it
def test_an_unreachable_endpoint_is_refused_in_seconds_naming_it(
    spark: Any, oauth_kafka: LocalKafka, oidc: LocalOidc, capfd: pytest.CaptureFixture[str]
) -> None:
    topic = _topic(oauth_kafka, _unique("oauth-unreachable"))
    with LocalOidc() as gone:
        endpoint = gone.token_endpoint_url  # a port nothing listens on once it is closed
    options = recipe(
        oauth_kafka,
        oidc,
        topic,
        client=(OAUTH_CLIENT[0], SECRET_FOR_REFUSALS),
        endpoint=endpoint,
    )
    message = _refused(spark, options, capfd)
    assert endpoint in message


def test_a_token_for_another_audience_is_refused_naming_the_endpoint(
    spark: Any, oauth_kafka: LocalKafka, oidc: LocalOidc, capfd: pytest.CaptureFixture[str]
) -> None:
    topic = _topic(oauth_kafka, _unique("oauth-audience"))
    client = ("other-audience", SECRET_FOR_REFUSALS)
    oidc.add_client(*client)
    oidc.audience = "not-kafka"
    try:
        message = _refused(spark, recipe(oauth_kafka, oidc, topic, client=client), capfd)
    finally:
        oidc.audience = "kafka"
    assert "refused this client's authentication" in message
    assert oidc.token_endpoint_url in message


# -- short-lived tokens -----------------------------------------------------------------------

TOKEN_LIFETIME_S = 20.0
REAUTH_MS = 15_000


@pytest.fixture(scope="module")
def short_oidc() -> Iterator[LocalOidc]:
    server = LocalOidc({OAUTH_CLIENT[0]: OAUTH_CLIENT[1]}, lifetime_s=TOKEN_LIFETIME_S)
    yield from running(server, "OIDC token endpoint with 20 s tokens")


@pytest.fixture(scope="module")
def short_kafka(short_oidc: LocalOidc) -> Iterator[LocalKafka]:
    listener = short_oidc.broker_listener(reauth_ms=REAUTH_MS)
    yield from running(LocalKafka(oauth=listener), "Kafka re-authenticating every 15 s")


def _add_file(directory: Path, name: str, ids: range) -> None:
    lines = "".join(json.dumps({"id": i}) + "\n" for i in ids)
    (directory / f".{name}.tmp").write_text(lines, encoding="utf-8")
    (directory / f".{name}.tmp").rename(directory / f"{name}.json")


def _run_through_lifetimes(
    spark: Any,
    kafka: LocalKafka,
    oidc: LocalOidc,
    tmp_path: Path,
    *,
    endpoint_down_at: int | None,
) -> tuple[Any, int, str, int]:
    """A streaming exactly-once query fed a file every ~7 s for > 5 token lifetimes, with idle
    gaps of a whole lifetime; ``endpoint_down_at``: the slot (of ~7 s) at which the token endpoint
    goes down for one lifetime. Returns the query, the rows fed, the topic, and how many token
    requests the endpoint had answered when it came back."""
    topic = _topic(kafka, _unique("oauth-lifetimes"))
    incoming = tmp_path / "in"
    incoming.mkdir()
    options = {
        **recipe(kafka, oidc, topic),
        "deliveryGuarantee": "exactly-once",
        "checkpointLocation": str(tmp_path / "cp"),
    }
    stream = (
        spark.readStream.schema("id BIGINT").option("maxFilesPerTrigger", 1).json(str(incoming))
    )
    query = (
        stream.selectExpr("CAST(id AS STRING) AS value")
        .writeStream.format("pykafka")
        .options(**options)
        .trigger(processingTime="2 seconds")
        .start()
    )
    ids_per_file = 50
    files = 0
    back_at = 0  # token requests the endpoint had answered when it came back
    began = time.monotonic()
    try:
        # > 5 lifetimes: 16 slots of ~7 s, idle for a whole lifetime after slots 4 and 10.
        for slot in range(16):
            if endpoint_down_at is not None and slot == endpoint_down_at:
                oidc.down()
            if endpoint_down_at is not None and slot == endpoint_down_at + 3:
                oidc.up()
                back_at = len(oidc.requests)
            if slot not in (5, 6, 7, 11, 12, 13):
                _add_file(incoming, f"f{files}", range(files * 50, (files + 1) * 50))
                files += 1
            time.sleep(7)
            assert query.exception() is None or endpoint_down_at is not None
            if query.exception() is not None:
                break
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and query.exception() is None:
            progress = query.status
            if not progress["isDataAvailable"] and not progress["isTriggerActive"]:
                break
            time.sleep(1)
    finally:
        query.stop()
    if query.exception() is None:
        assert time.monotonic() - began > 5 * TOKEN_LIFETIME_S
    return query, files * ids_per_file, topic, back_at


def _task_failures(spark: Any, query: Any) -> tuple[int, int]:
    """(jobs the query ran, failed jobs + failed task attempts + stage re-attempts) from Spark's
    status tracker: a streaming query's jobs are in the job group of its run id."""
    tracker = spark.sparkContext.statusTracker()
    jobs = tracker.getJobIdsForGroup(query.runId)
    failures = 0
    for job_id in jobs:
        job = tracker.getJobInfo(job_id)
        if job is None:
            continue
        failures += int(job.status == "FAILED")
        for stage_id in job.stageIds:
            stage = tracker.getStageInfo(stage_id)
            if stage is not None:
                failures += stage.numFailedTasks + stage.currentAttemptId
    return len(jobs), failures


def _committed_ids(checkpoint: Path) -> set[int]:
    """The ids of the input files in the batches the query committed (its checkpoint's commit
    log and file-source log; a file ``f<n>.json`` holds ids ``n*50 .. n*50+49``)."""
    committed = {int(f.name) for f in (checkpoint / "commits").iterdir() if f.name.isdigit()}
    ids: set[int] = set()
    # Batch files and the compacted ones (every 10th batch): each entry names its batch.
    for log in (checkpoint / "sources" / "0").iterdir():
        if log.name.startswith("."):
            continue
        for line in log.read_text("utf-8").splitlines()[1:]:
            entry = json.loads(line)
            if entry["batchId"] in committed:
                n = int(Path(entry["path"]).name.removeprefix("f").removesuffix(".json"))
                ids.update(range(n * 50, (n + 1) * 50))
    return ids


@pytest.mark.slow
def test_a_streaming_query_outlives_five_token_lifetimes_every_row_once(
    spark: Any, short_kafka: LocalKafka, short_oidc: LocalOidc, tmp_path: Path
) -> None:
    fetched_before = len(short_oidc.requests)
    query, total, topic, _ = _run_through_lifetimes(
        spark, short_kafka, short_oidc, tmp_path, endpoint_down_at=None
    )
    assert query.exception() is None
    # No batch failed, and none succeeded only on a retry: no failed task attempt, no stage
    # re-attempt (local[2,2] would retry a task once).
    jobs, failures = _task_failures(spark, query)
    assert jobs > 0
    assert failures == 0
    records = read_all(
        short_kafka.bootstrap_servers, topic, expected=total, isolation_level="read_committed"
    )
    counts = Counter(int(r.value) for r in records)
    assert set(counts) == set(range(total)) and all(c == 1 for c in counts.values())
    # Tokens were renewed along the way (not one token stretched past its lifetime).
    assert len(short_oidc.requests) - fetched_before >= 5


@pytest.mark.slow
def test_the_endpoint_down_for_a_lifetime_recovers_or_fails_naming_it(
    spark: Any,
    short_kafka: LocalKafka,
    short_oidc: LocalOidc,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    try:
        query, total, topic, back_at = _run_through_lifetimes(
            spark, short_kafka, short_oidc, tmp_path, endpoint_down_at=3
        )
    finally:
        short_oidc.up()
    error = query.exception()
    outcome = "recovered" if error is None else "failed naming the endpoint"
    # Which of the two this run took, in the test's report (its user properties) and output.
    request.node.user_properties.append(("outcome", outcome))
    print(f"endpoint down for a token lifetime: {outcome}")
    if error is not None:
        # A driver-side step that needed a token while the endpoint was down: a clear failure,
        # naming the endpoint and never the secret.
        text = str(error)
        assert short_oidc.token_endpoint_url in text
        assert "unreachable" in text
        assert OAUTH_CLIENT[1] not in text
        # Every row of the batches committed before the failure is there once (exactly-once);
        # a batch whose transaction committed while Spark's commit was not yet written may be
        # there too, whole and once, never part of one.
        committed = _committed_ids(tmp_path / "cp")
        records = read_all(short_kafka.bootstrap_servers, topic, isolation_level="read_committed")
        counts = Counter(int(r.value) for r in records)
        assert all(c == 1 for c in counts.values())
        assert committed <= set(counts)
        files = {i // 50 for i in counts}
        assert set(counts) == {i for n in files for i in range(n * 50, (n + 1) * 50)}
        return
    # The logins kept trying while it was down and had tokens again once it was back.
    assert len(short_oidc.requests) > back_at > 0
    records = read_all(
        short_kafka.bootstrap_servers, topic, expected=total, isolation_level="read_committed"
    )
    counts = Counter(int(r.value) for r in records)
    assert set(counts) == set(range(total)) and all(c == 1 for c in counts.values())
