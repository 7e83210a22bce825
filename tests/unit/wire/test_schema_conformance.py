"""Our message declarations against Apache Kafka's JSON message schemas.

The schemas are the ``clients/src/main/resources/common/message/*.json`` files, read from the copy
kafka-python ships (test-only dependency). For every class and every version we implement, the
fields present in that version must match the schema's: snake_case name, type, nullability, tag,
in wire order; and our flexible-version boundary must equal the schema's.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

import pytest

from kafka_sink.wire import messages as m
from kafka_sink.wire.schema import VersionRange, field_specs, struct_class

CLASSES = sorted(
    (cls for cls in vars(m).values() if hasattr(cls, "VALID_VERSIONS")), key=lambda c: c.__name__
)


def load_schema(name: str) -> dict[str, Any]:
    text = resources.files("kafka.protocol.schemas.resources").joinpath(f"{name}.json").read_text()
    return json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.MULTILINE))  # type: ignore[no-any-return]


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def schema_fields(
    fields: list[dict[str, Any]], common: dict[str, Any], version: int
) -> list[tuple[str, str, bool, int | None, Any]]:
    out = []
    for f in fields:
        if version not in VersionRange.parse(f["versions"]):
            continue
        nullable = version in VersionRange.parse(f.get("nullableVersions", "none"))
        children = f.get("fields")
        if children is None and f["type"].lstrip("[]") in common:
            children = common[f["type"].lstrip("[]")]["fields"]
        nested = schema_fields(children, common, version) if children else None
        out.append((snake(f["name"]), f["type"], nullable, f.get("tag"), nested))
    return out


def our_fields(cls: type, version: int) -> list[tuple[str, str, bool, int | None, Any]]:
    out = []
    for name, spec in field_specs(cls):
        if version not in spec.versions:
            continue
        nested = None
        if spec.type.lstrip("[]")[0].isupper():
            nested = our_fields(struct_class(cls, name), version)
        out.append((name, spec.type, version in spec.nullable_versions, spec.tag, nested))
    return out


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_declarations_match_apache_json(cls: type) -> None:
    schema = load_schema(cls.__name__)
    assert schema["apiKey"] == cls.API_KEY  # type: ignore[attr-defined]
    valid = VersionRange.parse(schema["validVersions"])
    low, high = cls.VALID_VERSIONS  # type: ignore[attr-defined]
    assert low in valid
    assert high in valid
    flexible = VersionRange.parse(schema["flexibleVersions"])
    first_flexible = None if str(flexible) == "none" else flexible.low
    assert first_flexible == cls.FLEXIBLE_VERSIONS  # type: ignore[attr-defined]
    common = {s["name"]: s for s in schema.get("commonStructs", [])}
    for version in range(low, high + 1):
        assert our_fields(cls, version) == schema_fields(schema["fields"], common, version), version
