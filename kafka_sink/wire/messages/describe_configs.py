"""DescribeConfigs (key 32), v1-v4: the configuration of a broker, topic or other resource.

Invariants: v0 was removed in Kafka 4.0. A resource is (``resource_type``, ``resource_name``):
a broker is ``RESOURCE_TYPE_BROKER`` named by its node id as a decimal string, a topic
``RESOURCE_TYPE_TOPIC`` named by the topic; a broker resource must be sent to that broker (or the
controller), which answers for itself. ``configuration_keys`` null asks for every key. Values of
sensitive keys come back null with ``is_sensitive`` set. ``config_source`` tells where the value
comes from (``CONFIG_SOURCE_*``); ``DEFAULT_CONFIG`` means nobody set it.
"""

# kfield() returns a dataclasses.field(); ruff cannot see that.
# ruff: noqa: RUF009

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kafka_sink.wire.api import ApiKey
from kafka_sink.wire.schema import kfield

RESOURCE_TYPE_TOPIC = 2
RESOURCE_TYPE_BROKER = 4

CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG = 1
CONFIG_SOURCE_DYNAMIC_BROKER_CONFIG = 2
CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG = 3
CONFIG_SOURCE_STATIC_BROKER_CONFIG = 4
CONFIG_SOURCE_DEFAULT_CONFIG = 5


@dataclass(slots=True)
class DescribeConfigsResponse:
    API_KEY: ClassVar[ApiKey] = ApiKey.DESCRIBE_CONFIGS
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (1, 4)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = 4

    @dataclass(slots=True)
    class DescribeConfigsSynonym:
        name: str = kfield("string", "1+")
        value: str | None = kfield("string", "1+", nullable="0+", default=None)
        source: int = kfield("int8", "1+")

    @dataclass(slots=True)
    class DescribeConfigsResourceResult:
        name: str = kfield("string")
        value: str | None = kfield("string", nullable="0+", default=None)
        read_only: bool = kfield("bool")
        config_source: int = kfield("int8", "1+", default=-1)
        is_sensitive: bool = kfield("bool")
        synonyms: list[DescribeConfigsResponse.DescribeConfigsSynonym] = kfield(
            "[]DescribeConfigsSynonym", "1+"
        )
        config_type: int = kfield("int8", "3+")
        documentation: str | None = kfield("string", "3+", nullable="0+", default=None)

    @dataclass(slots=True)
    class DescribeConfigsResult:
        error_code: int = kfield("int16")
        error_message: str | None = kfield("string", nullable="0+", default=None)
        resource_type: int = kfield("int8")
        resource_name: str = kfield("string")
        configs: list[DescribeConfigsResponse.DescribeConfigsResourceResult] = kfield(
            "[]DescribeConfigsResourceResult"
        )

    throttle_time_ms: int = kfield("int32")
    results: list[DescribeConfigsResponse.DescribeConfigsResult] = kfield("[]DescribeConfigsResult")

    def config_values(self) -> dict[tuple[int, str], dict[str, str | None]]:
        """(resource type, resource name) -> {config name: value} for the results without error."""
        return {
            (r.resource_type, r.resource_name): {c.name: c.value for c in r.configs}
            for r in self.results
            if r.error_code == 0
        }


@dataclass(slots=True)
class DescribeConfigsRequest:
    API_KEY: ClassVar[ApiKey] = ApiKey.DESCRIBE_CONFIGS
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (1, 4)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = 4
    RESPONSE_TYPE: ClassVar[type[DescribeConfigsResponse]] = DescribeConfigsResponse

    @dataclass(slots=True)
    class DescribeConfigsResource:
        resource_type: int = kfield("int8")
        resource_name: str = kfield("string")
        configuration_keys: list[str] | None = kfield("[]string", nullable="0+", default=None)

    resources: list[DescribeConfigsRequest.DescribeConfigsResource] = kfield(
        "[]DescribeConfigsResource"
    )
    include_synonyms: bool = kfield("bool", "1+")
    include_documentation: bool = kfield("bool", "3+")
