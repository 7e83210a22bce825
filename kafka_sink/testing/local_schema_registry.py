"""A real Schema Registry on 127.0.0.1 for tests: Apicurio Registry built from Maven Central.

``LocalSchemaRegistry()`` runs Apicurio Registry (in-memory storage) and gives in :attr:`url`
its Confluent-compatible base URL (``http://127.0.0.1:<port>/apis/ccompat/v6``): what
``schema.registry.url`` and confluent-kafka's ``SchemaRegistryClient`` take. Every start is an
empty registry (no subjects, global compatibility ``NONE`` until a test sets one).

Maven Central serves Apicurio's classes but no runnable build, so :func:`fetch_schema_registry`
(``python -m kafka_sink.testing fetch schema-registry``, run by ``make setup``) runs Quarkus's
build over them with the packaged POM ``conf/schema-registry.pom.xml``, through the Kafka jars'
fetch machinery (:func:`~kafka_sink.testing.prerequisites.fetch_with_maven`: the same staging,
``.fetched`` marker and bounded Maven run). The build is looked up in this order: an explicit
directory, ``$SCHEMA_REGISTRY_DIR``, ``.cache/schema-registry`` of a checkout, then the per-user
cache ``$XDG_CACHE_HOME/pykafka/schema-registry/<version>``.

What this registry answers differently from Confluent's (tests written against it assert these
answers; code under test must not depend on them):
``POST /compatibility/...?verbose=true`` gives the verdict without ``messages``; the reason of an
incompatible schema comes with the 409 of ``POST /subjects/{s}/versions``. A JSON Schema is
recognised by its content: a bare ``{"type": "object"}`` is refused (error 42201), one with
``properties`` (or ``$schema``) is taken.

Invariants:
- The port comes from the OS (127.0.0.1:0); a lost bind race is retried once with a new port.
- Ready means the JVM answers ``GET {url}/subjects`` with 200; failing that within
  ``startup_timeout_s`` (or the JVM exiting) raises :class:`SchemaRegistryStartError` with the
  tail of its log.
- A small heap (``heap``, 128m by default) and a C1-only JIT; ``close()`` (also on context exit)
  stops the JVM's process group (SIGTERM, SIGKILL after a bounded wait) and removes the temporary
  directory; a killed test process takes the JVM with it (parent-death signal, Linux). Starting,
  waiting and stopping: :class:`kafka_sink.testing.jvm.JvmServer`.
- Importing this module loads only the standard library.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Unpack

from kafka_sink.testing.jvm import SMALL_SERVER_JVM_FLAGS, JvmServer, http_ready_problem
from kafka_sink.testing.prerequisites import (
    FetchOptions,
    KafkaSetupError,
    MavenFetch,
    candidate_dirs,
    fetch_with_maven,
    find_conf_dir,
    find_java,
    pom_property,
)

__all__ = [
    "CCOMPAT_PATH",
    "LocalSchemaRegistry",
    "SchemaRegistrySetupError",
    "SchemaRegistryStartError",
    "default_schema_registry_dir",
    "fetch_schema_registry",
    "find_schema_registry_dir",
    "schema_registry_version",
]

SCHEMA_REGISTRY_POM = "schema-registry.pom.xml"
CCOMPAT_PATH = "/apis/ccompat/v6"
_RUNNER_GLOB = "*-runner.jar"
_PROBE_TIMEOUT_S = 2.0
# The first Maven run downloads the Quarkus build tooling too (a few hundred MB into ~/.m2).
_DEFAULT_FETCH_TIMEOUT_S = 1800.0
_FETCH_HINT = (
    "Run `python -m kafka_sink.testing fetch schema-registry` (needs Java 17+ and Maven) to build "
    "it into {default}, run `make setup` in a checkout of the repository, or set "
    "SCHEMA_REGISTRY_DIR to a directory holding such a build."
)


class SchemaRegistrySetupError(KafkaSetupError):
    """The registry's build (or java, or Maven) is missing: the message says how to get it."""


class SchemaRegistryStartError(RuntimeError):
    """The registry did not become ready (or exited); the message carries its log tail."""


def schema_registry_version() -> str:
    """The Apicurio Registry version the packaged POM builds (``<apicurio.version>``)."""
    return pom_property(SCHEMA_REGISTRY_POM, "apicurio.version")


def default_schema_registry_dir() -> Path:
    """The per-user directory that ``fetch schema-registry`` fills by default."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pykafka" / "schema-registry" / schema_registry_version()


def _runner_jar(directory: Path) -> Path | None:
    jars = sorted(directory.glob(_RUNNER_GLOB)) if directory.is_dir() else []
    return jars[0] if jars else None


def find_schema_registry_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The directory holding the registry's build (``*-runner.jar`` and its ``lib/``)."""
    candidates = candidate_dirs(
        explicit, "SCHEMA_REGISTRY_DIR", ".cache/schema-registry", default_schema_registry_dir()
    )
    for directory in candidates:
        if _runner_jar(directory) is not None:
            return directory.resolve()
    raise SchemaRegistrySetupError(
        f"Schema Registry build not found (looked for {_RUNNER_GLOB} in "
        + ", ".join(str(c) for c in candidates)
        + "). "
        + _FETCH_HINT.format(default=default_schema_registry_dir())
    )


def fetch_schema_registry(
    dest: str | os.PathLike[str] | None = None, **options: Unpack[FetchOptions]
) -> Path:
    """Build the registry with Maven into ``dest``; return that directory.

    ``dest`` defaults to ``$SCHEMA_REGISTRY_DIR`` when set, else
    :func:`default_schema_registry_dir`, which :func:`find_schema_registry_dir` (and so
    ``LocalSchemaRegistry``) searches without any setting. Maven gets 1800 s unless
    ``timeout_s`` says otherwise.
    """
    if dest is None and os.environ.get("SCHEMA_REGISTRY_DIR"):
        dest = os.environ["SCHEMA_REGISTRY_DIR"]
    spec = MavenFetch(
        what=f"Apicurio Registry {schema_registry_version()} build",
        kind="Schema Registry build directory",
        pom=(find_conf_dir() / SCHEMA_REGISTRY_POM).read_bytes(),
        # Quarkus's build writes the runner jar and lib/ into Maven's target/ next to pom.xml.
        args=lambda _staged: ["package", "-DskipTests"],
        staged=lambda work: work / "target",
        expects=_RUNNER_GLOB,
        error=SchemaRegistrySetupError,
        timeout_s=_DEFAULT_FETCH_TIMEOUT_S,
    )
    target = Path(dest) if dest is not None else default_schema_registry_dir()
    return fetch_with_maven(spec, target, **options)


class _PortRaceError(SchemaRegistryStartError):
    """The port picked a moment earlier was taken before the JVM bound it."""


class LocalSchemaRegistry(JvmServer):
    """Apicurio Registry (in memory) on 127.0.0.1; :attr:`url` is its Confluent-compatible API."""

    name = "the Schema Registry"
    log_name = "registry.log"
    workdir_prefix = "kafka-sink-registry-"
    start_error = SchemaRegistryStartError
    port_race_error = _PortRaceError
    poll_s = 0.25

    def __init__(
        self,
        *,
        heap: str = "128m",
        startup_timeout_s: float = 120.0,
        directory: str | os.PathLike[str] | None = None,
        java: str | None = None,
    ) -> None:
        super().__init__(startup_timeout_s=startup_timeout_s)
        self.heap = heap
        self._directory_arg = directory
        self._java_arg = java
        self._java = ""
        self._runner = Path()

    def __repr__(self) -> str:
        return f"LocalSchemaRegistry(url={self.url!r})"

    @property
    def port(self) -> int:
        """The HTTP port (0 before the first start)."""
        return self._port

    @property
    def url(self) -> str:
        """The Confluent-compatible base URL (``schema.registry.url``)."""
        return f"http://127.0.0.1:{self.port}{CCOMPAT_PATH}"

    # -- internals ----------------------------------------------------------------------------
    def _resolve(self) -> None:
        self._java = find_java(self._java_arg)
        runner = _runner_jar(find_schema_registry_dir(self._directory_arg))
        assert runner is not None  # find_schema_registry_dir returns only a directory with one
        self._runner = runner

    def _command(self) -> list[str]:
        return [
            self._java,
            f"-Xmx{self.heap}",
            *SMALL_SERVER_JVM_FLAGS,
            f"-Dquarkus.http.port={self._port}",
            "-Dquarkus.http.host=127.0.0.1",
            "-jar",
            str(self._runner),
        ]

    def _ready_problem(self, log: Path) -> str | None:
        """None once ``GET {url}/subjects`` answers 200, else what it did instead."""
        return http_ready_problem(f"{self.url}/subjects", _PROBE_TIMEOUT_S)
