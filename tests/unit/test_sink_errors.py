"""The sink's errors are one family: every exception class of ``kafka_sink.spark`` and
``kafka_sink.formats`` is defined in ``kafka_sink.sink_errors`` under ``SinkError`` (itself a
``KafkaError``), keeps the builtin or client base callers catch it by, and docs/errors.md lists
each of them."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path
from types import ModuleType

import pytest

import kafka_sink.formats
import kafka_sink.spark
from kafka_sink import sink_errors
from kafka_sink.errors import ConfigError, KafkaError, KafkaTimeoutError
from kafka_sink.sink_errors import (
    CommitStoreError,
    CommitStoreUnavailableError,
    IncompatibleSchemaError,
    SchemaRegistryError,
    SinkDataError,
    SinkDeliveryTimeoutError,
    SinkError,
    SinkModeError,
    SinkOptionError,
    SinkSchemaError,
)

ROOT = Path(__file__).resolve().parents[2]
# Private signals caught inside the module that raises them: never seen by a caller.
INTERNAL = {"kafka_sink.formats.registry._MalformedError"}


def _modules(package: ModuleType) -> list[ModuleType]:
    walked = pkgutil.walk_packages(package.__path__, package.__name__ + ".")
    return [package, *(importlib.import_module(info.name) for info in walked)]


def _exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class a module of spark or formats defines or imports, by qualified
    name (where it is defined), plus every one sink_errors defines."""
    out: dict[str, type[BaseException]] = {}
    modules = [*_modules(kafka_sink.spark), *_modules(kafka_sink.formats), sink_errors]
    for module in modules:
        for _, value in inspect.getmembers(module, inspect.isclass):
            if not issubclass(value, BaseException):
                continue
            home = value.__module__
            if home == "kafka_sink.sink_errors" or home.startswith(
                ("kafka_sink.spark", "kafka_sink.formats")
            ):
                out[f"{home}.{value.__qualname__}"] = value
    return out


def test_every_exception_of_spark_and_formats_is_a_sink_error_defined_in_sink_errors() -> None:
    classes = _exception_classes()
    assert len(classes) > 20  # a broken walk would pass vacuously
    outside = sorted(
        name
        for name, cls in classes.items()
        if cls.__module__ != "kafka_sink.sink_errors" and name not in INTERNAL
    )
    assert outside == [], "define these in kafka_sink/sink_errors.py"
    not_sink = sorted(
        n for n, c in classes.items() if n not in INTERNAL and not issubclass(c, SinkError)
    )
    assert not_sink == [], "these must derive from SinkError"
    assert set(INTERNAL) <= set(classes), "an internal signal named here is gone: drop its name"


def test_sink_errors_exports_every_class_it_defines() -> None:
    defined = {
        name
        for name, cls in inspect.getmembers(sink_errors, inspect.isclass)
        if cls.__module__ == sink_errors.__name__
    }
    assert defined == set(sink_errors.__all__)


def test_except_sink_error_catches_a_delivery_timeout() -> None:
    with pytest.raises(SinkError) as caught:
        raise SinkDeliveryTimeoutError("4 record(s) not acknowledged")
    # Still what the producer's timeouts are: retriable, caught by except KafkaTimeoutError.
    assert isinstance(caught.value, KafkaTimeoutError)
    assert caught.value.retriable


def test_sink_error_is_the_packages_kafka_error() -> None:
    with pytest.raises(KafkaError):
        raise SinkError("x")
    assert not SinkError.retriable


@pytest.mark.parametrize(
    ("error", "old_base"),
    [
        (SinkOptionError, ConfigError),
        (SinkOptionError, ValueError),
        (SinkSchemaError, ConfigError),
        (SinkSchemaError, ValueError),
        (SinkDataError, ValueError),
        (SinkModeError, ValueError),
        (CommitStoreError, OSError),
        (CommitStoreUnavailableError, OSError),
        (SchemaRegistryError, RuntimeError),
        (IncompatibleSchemaError, RuntimeError),
    ],
)
def test_each_keeps_the_base_it_was_caught_by(
    error: type[BaseException], old_base: type[BaseException]
) -> None:
    assert issubclass(error, old_base)
    assert issubclass(error, SinkError)


def test_the_stores_and_registrys_errors_keep_their_fields() -> None:
    store = CommitStoreError("Permission denied")
    assert str(store) == "Permission denied"
    refused = IncompatibleSchemaError("orders-value", ["a field lost"], url="http://r", level=None)
    assert (refused.status, refused.subject, refused.reasons) == (
        409,
        "orders-value",
        ("a field lost",),
    )


def test_docs_page_lists_every_sink_error_and_is_linked() -> None:
    page = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
    missing = sorted(name for name in sink_errors.__all__ if f"`{name}`" not in page)
    assert missing == []
    assert "docs/errors.md" in (sink_errors.__doc__ or "")
    assert "(docs/errors.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
