"""README's "Managed Kafka" recipes: one per service, each a few options and no jar, and each
accepted by the sink's option parser as written (variables filled with placeholders). The
self-run OIDC recipe is the one the Spark proof runs (``tests/spark/test_spark_oauth.py`` builds
its options from it, replacing only what points at this machine)."""

from __future__ import annotations

import pytest

from kafka_sink.spark.options import SinkOptions
from tests.readme_recipes import recipe_options, recipes

OPENINGS = (
    "Amazon MSK with IAM",
    "Confluent Cloud with an API key",
    "Confluent Cloud with OAuth",
    "Azure Event Hubs with a connection string",
    "Azure Event Hubs with Entra ID",
    "Google Cloud Managed Service for Apache Kafka",
    "A self-run cluster with an OIDC provider",
)
#: What the Spark proof replaces in the self-run recipe: the addresses of this machine's broker
#: and token endpoint, the listener's protocol (no TLS here), the client and its secret.
SPARK_REPLACES = frozenset(
    {
        "kafka.bootstrap.servers",
        "kafka.security.protocol",
        "kafka.sasl.oauthbearer.token.endpoint.url",
        "kafka.sasl.oauthbearer.client.credentials.client.id",
        "kafka.sasl.oauthbearer.client.credentials.client.secret",
        "topic",
    }
)


def filled(opening: str) -> dict[str, str]:
    return {k: "placeholder-value" if v is None else v for k, v in recipe_options(opening)}


def test_there_is_one_recipe_per_service_and_nothing_else() -> None:
    titles = list(recipes())
    assert len(titles) == len(OPENINGS)
    for title, opening in zip(titles, OPENINGS, strict=True):
        assert title.startswith(opening)


@pytest.mark.parametrize("opening", OPENINGS)
def test_each_recipe_is_a_few_options_no_jar_and_parses(opening: str) -> None:
    options = filled(opening)
    assert 3 <= len(options) <= 9
    assert not any("jar" in key.lower() or "jaas" in key.lower() for key in options)
    parsed = SinkOptions.from_options(options)
    assert parsed.topic == "events"


def test_the_self_run_recipe_is_oauthbearer_with_client_credentials() -> None:
    options = dict(recipe_options("A self-run cluster with an OIDC provider"))
    assert options["kafka.sasl.mechanism"] == "OAUTHBEARER"
    assert options["kafka.sasl.oauthbearer.client.credentials.client.secret"] is None
    # Everything else the Spark proof keeps as README says it.
    assert set(options) >= SPARK_REPLACES
    kept = {k: v for k, v in options.items() if k not in SPARK_REPLACES}
    assert kept == {"kafka.sasl.mechanism": "OAUTHBEARER", "kafka.sasl.oauthbearer.scope": "kafka"}
