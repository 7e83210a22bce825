"""User plugins of the send path: serializers, the partitioner and interceptors, by object or path.

Role: the one place that turns a ``key.serializer`` / ``value.serializer`` / ``partitioner.class``
/ ``interceptor.classes`` setting into something the producer can call. A setting is either an
object (a callable, a class, an instance) or an import path, ``pkg.mod.Attr`` or
``pkg.mod:Attr``, resolved with :func:`pkgutil.resolve_name`.

Two steps, so the config stays plain data:
- :func:`check_plugin` (used by ``ProducerConfig``): import the path and check the object's shape
  (callable, call signature, methods) without instantiating anything. The config keeps the path
  string (picklable, so it travels to Spark executors) or the object as given.
- ``load_*`` (used by ``KafkaProducer``): instantiate classes (with no arguments) and adapt the
  result to one call form. Each producer gets its own instances, as Java's does.

Invariants:
- A path that does not import, or an object of the wrong shape, is a ConfigError naming the key
  (quoting the path and the import error capped: a message never grows with the value),
  raised when the config is built, never at the first ``send()``.
- Java class names (``org.apache.kafka...``) are refused with a message saying why.
- A serializer is given ``(data)`` if it can be called with one argument, else
  ``(topic, data, headers)``; it is never called for None (a null key or value stays null, so
  tombstones survive). Its failure, or a result that is not bytes / str / None, is a
  :class:`~kafka_sink.errors.SerializationError`.
- A custom partitioner's result must be an int in ``[0, partition_count)``; anything else is a
  ValueError for that record naming the partitioner.
"""

from __future__ import annotations

import inspect
import logging
import pkgutil
from collections.abc import Callable
from typing import Any

from kafka_sink.errors import ConfigError, SerializationError
from kafka_sink.net.user_info import shown_value

__all__ = [
    "CustomPartitioner",
    "Serializer",
    "check_plugin",
    "describe",
    "load_interceptors",
    "load_metrics_reporter",
    "load_partitioner",
    "load_serializer",
    "resolve",
]

log = logging.getLogger(__name__)

SERIALIZER_KEYS = ("key.serializer", "value.serializer")
PARTITIONER_KEY = "partitioner.class"
INTERCEPTORS_KEY = "interceptor.classes"
INTERCEPTOR_METHODS = ("on_send", "on_acknowledgement", "close")
METRICS_REPORTER_KEY = "metrics.reporter"
METRIC_REPORTERS_KEY = "metric.reporters"  # Java's list form of the same
# How much of an import error's text a message keeps (Python's quotes the path it could not
# import, which shown_value has capped already).
_WHY_CHARS = 200
REPORTER_METHODS = ("init", "metric_change", "metric_removal", "close")


def describe(spec: object) -> str:
    """A short, stable name for a plugin setting (its path, or the object's qualified name)."""
    if isinstance(spec, str):
        return spec
    target = spec if inspect.isclass(spec) or inspect.isroutine(spec) else type(spec)
    module = getattr(target, "__module__", None) or "?"
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or "?"
    return f"{module}.{name}"


def resolve(key: str, path: str) -> object:
    """The object an import path names; a ConfigError naming ``key`` if it cannot be imported."""
    if path.startswith(("org.apache.kafka.", "io.confluent.")):
        raise ConfigError(
            f"{key}: {shown_value(path)} is a Java class, which this Python producer cannot "
            "load; give a Python import path (pkg.module.Name or pkg.module:Name) or a Python "
            "object"
            + (", or remove the key (bytes and str need no serializer)" if "serial" in key else "")
        )
    try:
        return pkgutil.resolve_name(path)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(
            f"{key}: cannot import {shown_value(path)} ({_why(exc)}); give an import path "
            "pkg.module.Name or pkg.module:Name of a module importable by this Python process"
        ) from None
    except Exception as exc:  # the module raised while being imported
        raise ConfigError(f"{key}: importing {shown_value(path)} failed: {_why(exc)}") from None


def _why(exc: BaseException) -> str:
    """An import error in a message: its kind and text, capped (the text may quote the path)."""
    text = str(exc)
    if len(text) > _WHY_CHARS:
        text = f"{text[:_WHY_CHARS]}…"
    return f"{type(exc).__name__}: {text}"


def _target(key: str, spec: object) -> object:
    return resolve(key, spec) if isinstance(spec, str) else spec


def _binds(fn: Callable[..., Any], count: int) -> bool | None:
    """Whether ``fn`` accepts ``count`` positional arguments; None if its signature is unknown."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(*([None] * count))
    except TypeError:
        return False
    return True


def _serializer_arity(key: str, name: str, fn: Callable[..., Any]) -> int:
    one = _binds(fn, 1)
    if one is None or one:
        return 1
    if _binds(fn, 3):
        return 3
    raise ConfigError(
        f"{key}: {name} must accept (data) or (topic, data, headers) and return bytes"
    )


def _serializer_callable(key: str, name: str, obj: object) -> Callable[..., Any]:
    """The function to call: the ``serialize`` method if there is one, else the object."""
    method = getattr(obj, "serialize", None)
    if callable(method):
        return method  # type: ignore[no-any-return]
    if callable(obj):
        return obj
    raise ConfigError(f"{key}: {name} is not callable and has no serialize() method")


def check_plugin(key: str, spec: object) -> None:
    """Check a plugin setting's shape (importing a path, instantiating nothing)."""
    name = describe(spec)
    obj = _target(key, spec)
    if key in SERIALIZER_KEYS:
        if inspect.isclass(obj):
            _instance_needs_no_args(key, name, obj)
            instances_callable = any("__call__" in vars(c) for c in obj.__mro__)
            if not callable(getattr(obj, "serialize", None)) and not instances_callable:
                raise ConfigError(f"{key}: class {name} has neither serialize() nor __call__()")
            return
        _serializer_arity(key, name, _serializer_callable(key, name, obj))
    elif key == PARTITIONER_KEY:
        if inspect.isclass(obj):
            _instance_needs_no_args(key, name, obj)
            if not callable(getattr(obj, "partition", None)):
                raise ConfigError(
                    f"{key}: class {name} has no partition(topic, key_bytes, partition_count) "
                    "method"
                )
            return
        fn = _partition_callable(key, name, obj)
        if _binds(fn, 3) is False:
            raise ConfigError(
                f"{key}: {name} must accept (topic, key_bytes, partition_count) and return an int"
            )
    elif key == INTERCEPTORS_KEY:
        if inspect.isclass(obj):
            _instance_needs_no_args(key, name, obj)
        if not any(callable(getattr(obj, m, None)) for m in INTERCEPTOR_METHODS):
            raise ConfigError(
                f"{key}: {name} defines none of on_send(record), "
                "on_acknowledgement(metadata, exception), close()"
            )
    elif key in {METRICS_REPORTER_KEY, METRIC_REPORTERS_KEY}:
        if inspect.isclass(obj):
            _instance_needs_no_args(key, name, obj)
        elif not callable(obj) and not any(
            callable(getattr(obj, m, None)) for m in REPORTER_METHODS
        ):
            raise ConfigError(
                f"{key}: {name} is neither a callable taking each metric nor an object with "
                "init(metrics), metric_change(metric), metric_removal(metric), close()"
            )
    else:  # pragma: no cover - the config only asks about the keys above
        raise ValueError(f"{key} is not a plugin setting")


def _instance_needs_no_args(key: str, name: str, cls: object) -> None:
    if _binds(cls, 0) is False:  # type: ignore[arg-type]
        raise ConfigError(f"{key}: class {name} must be constructible with no arguments")


def _instantiate(key: str, name: str, obj: object) -> object:
    if not inspect.isclass(obj):
        return obj
    try:
        return obj()
    except Exception as exc:
        raise ConfigError(f"{key}: creating {name}() failed: {type(exc).__name__}: {exc}") from exc


def _partition_callable(key: str, name: str, obj: object) -> Callable[..., Any]:
    method = getattr(obj, "partition", None)
    if callable(method):
        return method  # type: ignore[no-any-return]
    if callable(obj):
        return obj
    raise ConfigError(f"{key}: {name} is not callable and has no partition() method")


class Serializer:
    """A user serializer in one call form: ``serializer(topic, data, headers) -> bytes | None``.

    ``headers`` is the record's header list; a three-argument serializer may append to it.
    """

    __slots__ = ("_fn", "_key", "_takes_headers", "name")

    def __init__(self, key: str, name: str, fn: Callable[..., Any], takes_headers: bool) -> None:
        self._key = key
        self.name = name
        self._fn = fn
        self._takes_headers = takes_headers

    @property
    def takes_headers(self) -> bool:
        return self._takes_headers

    def __call__(
        self, topic: str, data: object, headers: list[tuple[str, bytes | None]]
    ) -> bytes | None:
        if data is None:
            return None
        try:
            out = self._fn(topic, data, headers) if self._takes_headers else self._fn(data)
        except Exception as exc:
            raise SerializationError(
                f"{self._key} {self.name} failed for a record to topic {topic!r}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if out is None or type(out) is bytes:
            return out
        if isinstance(out, bytes | bytearray | memoryview):
            return bytes(out)
        if isinstance(out, str):
            return out.encode("utf-8")
        raise SerializationError(
            f"{self._key} {self.name} returned {type(out).__name__} for a record to topic "
            f"{topic!r}; a serializer must return bytes, str (written as UTF-8) or None"
        )

    def __repr__(self) -> str:
        return f"Serializer({self._key}={self.name})"


def load_serializer(key: str, spec: object) -> Serializer:
    name = describe(spec)
    obj = _instantiate(key, name, _target(key, spec))
    fn = _serializer_callable(key, name, obj)
    return Serializer(key, name, fn, _serializer_arity(key, name, fn) == 3)


class CustomPartitioner:
    """``partitioner.class`` in one call form, with its result checked."""

    __slots__ = ("_close", "_fn", "name")

    def __init__(self, name: str, fn: Callable[..., Any], close: Callable[[], Any] | None) -> None:
        self.name = name
        self._fn = fn
        self._close = close

    def partition(self, topic: str, key: bytes | None, num_partitions: int) -> int:
        """The partition for a record; ValueError if the partitioner's answer is not valid."""
        result: int = self._fn(topic, key, num_partitions)
        if type(result) is not int:
            if isinstance(result, bool) or not hasattr(result, "__index__"):
                raise ValueError(
                    f"partitioner.class {self.name} returned {type(result).__name__} for a "
                    f"record to topic {topic!r}; it must return an int partition"
                )
            result = result.__index__()
        if not 0 <= result < num_partitions:
            raise ValueError(
                f"partitioner.class {self.name} returned partition {result} for a record to "
                f"topic {topic!r}, which has {num_partitions} partitions "
                f"(valid: 0..{num_partitions - 1})"
            )
        return result

    def close(self) -> None:
        if self._close is None:
            return
        try:
            self._close()
        except Exception:
            log.warning("partitioner.class %s: close() raised; ignored", self.name, exc_info=True)


def load_partitioner(spec: object) -> CustomPartitioner:
    name = describe(spec)
    obj = _instantiate(PARTITIONER_KEY, name, _target(PARTITIONER_KEY, spec))
    fn = _partition_callable(PARTITIONER_KEY, name, obj)
    close = getattr(obj, "close", None) if hasattr(obj, "partition") else None
    return CustomPartitioner(name, fn, close if callable(close) else None)


def load_interceptors(specs: tuple[object, ...]) -> list[tuple[str, object]]:
    """(name, instance) of each interceptor, in configured order."""
    out = []
    for spec in specs:
        name = describe(spec)
        out.append((name, _instantiate(INTERCEPTORS_KEY, name, _target(INTERCEPTORS_KEY, spec))))
    return out


class _Reporter:
    """A metrics reporter as configured: the methods it defines, or a callable told of each
    metric as ``metric_change``; a missing method does nothing."""

    def __init__(self, name: str, obj: object) -> None:
        self.name = name
        if not any(callable(getattr(obj, m, None)) for m in REPORTER_METHODS) and callable(obj):
            self._methods: dict[str, Callable[..., Any]] = {"metric_change": obj}
        else:
            self._methods = {
                m: fn for m in REPORTER_METHODS if callable(fn := getattr(obj, m, None))
            }

    def _call(self, method: str, *args: object) -> None:
        fn = self._methods.get(method)
        if fn is not None:
            fn(*args)

    def init(self, metrics: list[Any]) -> None:
        self._call("init", metrics)

    def metric_change(self, metric: Any) -> None:
        self._call("metric_change", metric)

    def metric_removal(self, metric: Any) -> None:
        self._call("metric_removal", metric)

    def close(self) -> None:
        self._call("close")

    def __repr__(self) -> str:
        return f"MetricsReporter({self.name})"


def load_metrics_reporter(spec: object, key: str = METRICS_REPORTER_KEY) -> _Reporter:
    """``metrics.reporter`` (or one of ``metric.reporters``, ``key``): a class (made with no
    arguments), an object with Java's MetricsReporter methods, or a callable told of each
    metric."""
    name = describe(spec)
    obj = _target(key, spec)
    return _Reporter(name, _instantiate(key, name, obj))
