"""README's "Managed Kafka" recipes: one per service, each a few options and no jar, and each
accepted by the sink's option parser as written (variables filled with placeholders). The
self-run OIDC recipe is the one the Spark proof runs (``tests/spark/test_spark_oauth.py`` builds
its options from it, replacing only what points at this machine); the Confluent Cloud and Event
Hubs recipes that need no cloud identity run against local brokers
(``tests.readme_recipes.recipe_sink_options``), and README's note under the recipes names the
tests that run each one."""

from __future__ import annotations

import re

import pytest

from kafka_sink.spark.options import SinkOptions
from tests.readme_recipes import README, SECTION, recipe_options, recipe_sink_options, recipes

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


#: The tests that run a recipe against a broker, by recipe.
RUN_BY = {
    "A self-run cluster with an OIDC provider": (
        "tests/spark/test_spark_oauth.py::test_writes_through_oauthbearer_are_read_back"
    ),
    "Confluent Cloud with OAuth": (
        "tests/broker/test_oauth_broker.py::"
        "test_the_confluent_cloud_oauth_recipe_carries_its_extensions_to_the_broker"
    ),
    "Azure Event Hubs with Entra ID": (
        "tests/broker/test_oauth_broker.py::"
        "test_the_event_hubs_entra_id_recipe_with_an_app_secret_writes_through_the_listener"
    ),
    "Confluent Cloud with an API key": (
        "tests/broker/test_presets_broker.py::"
        "test_the_plain_recipes_of_readme_write_through_a_sasl_listener"
    ),
    "Azure Event Hubs with a connection string": (
        "tests/broker/test_presets_broker.py::"
        "test_the_plain_recipes_of_readme_write_through_a_sasl_listener"
    ),
}


@pytest.mark.parametrize("opening", sorted(RUN_BY))
def test_the_readme_names_the_test_that_runs_each_recipe(opening: str) -> None:
    path, name = RUN_BY[opening].split("::")
    source = (README.parent / path).read_text(encoding="utf-8")
    assert re.search(rf"^def {name}\(", source, re.MULTILINE), RUN_BY[opening]
    assert f'"{opening}' in source  # the test reads this recipe from README
    section = README.read_text(encoding="utf-8").partition(f"\n{SECTION}\n")[2]
    assert f"`{path}`" in section.split("\n## ", 1)[0]


def test_a_recipe_run_replaces_only_addresses_secrets_and_the_protocol() -> None:
    with pytest.raises(ValueError, match="may not replace"):
        recipe_sink_options(
            "Confluent Cloud with OAuth", {"kafka.sasl.oauthbearer.extensions": "x"}
        )
    with pytest.raises(ValueError, match="leaves"):
        recipe_sink_options("Confluent Cloud with an API key", {"kafka.sasl.username": "k"})
    options = recipe_sink_options(
        "Confluent Cloud with OAuth",
        {
            "kafka.bootstrap.servers": "127.0.0.1:9092",
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.oauthbearer.token.endpoint.url": "http://127.0.0.1:1/token",
            "kafka.sasl.oauthbearer.client.credentials.client.id": "c",
            "kafka.sasl.oauthbearer.client.credentials.client.secret": "s",
        },
    )
    assert options.producer_config["sasl.oauthbearer.extensions"] == (
        "logicalCluster=lkc-abc12,identityPoolId=pool-Ab1"
    )
    assert options.topic == "events"
