"""ApiVersions (key 18), v0-v4: which API versions a broker supports.

Invariants: the response always travels with response header v0 (handled in
:mod:`kafka_sink.wire.protocol`); a broker that does not know the requested version answers with
error UNSUPPORTED_VERSION (35) in the v0 body format, which the protocol layer decodes as v0.
In v3+ the software name and version must match ``[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?``
or the broker answers INVALID_REQUEST.
"""

# kfield() returns a dataclasses.field(); ruff cannot see that.
# ruff: noqa: RUF009

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kafka_sink.wire.api import ApiKey
from kafka_sink.wire.schema import kfield


@dataclass(slots=True)
class ApiVersionsResponse:
    API_KEY: ClassVar[ApiKey] = ApiKey.API_VERSIONS
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 4)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = 3

    @dataclass(slots=True)
    class ApiVersion:
        api_key: int = kfield("int16")
        min_version: int = kfield("int16")
        max_version: int = kfield("int16")

    @dataclass(slots=True)
    class SupportedFeatureKey:
        name: str = kfield("string", "3+")
        min_version: int = kfield("int16", "3+")
        max_version: int = kfield("int16", "3+")

    @dataclass(slots=True)
    class FinalizedFeatureKey:
        name: str = kfield("string", "3+")
        max_version_level: int = kfield("int16", "3+")
        min_version_level: int = kfield("int16", "3+")

    error_code: int = kfield("int16")
    api_keys: list[ApiVersionsResponse.ApiVersion] = kfield("[]ApiVersion")
    throttle_time_ms: int = kfield("int32", "1+")
    supported_features: list[ApiVersionsResponse.SupportedFeatureKey] = kfield(
        "[]SupportedFeatureKey", "3+", tag=0
    )
    finalized_features_epoch: int = kfield("int64", "3+", tag=1, default=-1)
    finalized_features: list[ApiVersionsResponse.FinalizedFeatureKey] = kfield(
        "[]FinalizedFeatureKey", "3+", tag=2
    )
    zk_migration_ready: bool = kfield("bool", "3+", tag=3)

    def version_ranges(self) -> dict[int, tuple[int, int]]:
        """api key -> (min, max) version: the input of :func:`kafka_sink.wire.api.negotiate`."""
        return {k.api_key: (k.min_version, k.max_version) for k in self.api_keys}


@dataclass(slots=True)
class ApiVersionsRequest:
    API_KEY: ClassVar[ApiKey] = ApiKey.API_VERSIONS
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 4)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = 3
    RESPONSE_TYPE: ClassVar[type[ApiVersionsResponse]] = ApiVersionsResponse

    client_software_name: str = kfield("string", "3+", default="kafka-sink")
    client_software_version: str = kfield("string", "3+", default="0.1.0")
