"""What a LocalKafka needs besides Python, and where it is found: templates, jars and java.

- The broker templates and the Maven POM of the broker classpath are package data in
  ``kafka_sink/testing/conf/`` (the only copy: a checkout and an installed wheel read the same
  files), located with :mod:`importlib.resources`.
- The broker jars (``kafka_2.13-<version>.jar`` and its runtime dependencies) are looked up in
  this order: an explicit directory, ``$KAFKA_JARS_DIR``, ``.cache/kafka/lib`` of a checkout
  (next to the package, or in the working directory or one of its parents), then the per-user
  cache ``$XDG_CACHE_HOME/pykafka/kafka/<version>/lib`` (``~/.cache/...`` by default).
- :func:`fetch_kafka_jars` (``python -m kafka_sink.testing fetch``) fills a jars directory with
  Maven's ``dependency:copy-dependencies`` on the packaged POM. It needs ``java`` and ``mvn``, and
  says so before running anything when either is missing. Its machinery,
  :func:`fetch_with_maven` over a :class:`MavenFetch`, also builds the local Schema Registry
  (:mod:`kafka_sink.testing.local_schema_registry`).

Invariants (of every fetch through :func:`fetch_with_maven`):
- A fetch never leaves a half-filled directory: Maven writes into a sibling temporary directory,
  which replaces the target only once it holds the expected file (the Kafka jar, the registry's
  runner jar). It replaces only an empty directory or one an earlier fetch (or ``make setup``)
  filled, never anything else.
- A finished fetch writes ``.fetched`` holding the POM's SHA-256; a later fetch with the same POM
  finds it and does nothing (``force`` fetches anyway). A fetch with a changed POM starts over.
- Maven runs with a bounded time; on timeout it is killed and the error says what it waited for.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TypedDict, Unpack

__all__ = [
    "BROKER_POM",
    "FetchOptions",
    "KafkaSetupError",
    "MavenFetch",
    "candidate_dirs",
    "default_jars_dir",
    "fetch_kafka_jars",
    "fetch_with_maven",
    "find_conf_dir",
    "find_jars_dir",
    "find_java",
    "find_mvn",
    "kafka_version",
    "pom_property",
]

BROKER_POM = "kafka-broker.pom.xml"
FETCHED_MARKER = ".fetched"
MAVEN_COPY_GOAL = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"
_TEMPLATE_PROBE = "broker-single.properties"
_DEFAULT_FETCH_TIMEOUT_S = 900.0
_POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}

_FETCH_HINT = (
    "Run `python -m kafka_sink.testing fetch` (needs Java 17+ and Maven) to download them into "
    "{default}, run `make setup` in a checkout of the repository, or set KAFKA_JARS_DIR to a "
    "directory holding them."
)


class KafkaSetupError(RuntimeError):
    """Java, Maven, the Kafka jars or the configuration templates are missing."""


# -- package data ------------------------------------------------------------------------------


def find_conf_dir() -> Path:
    """The package's ``conf/`` directory: broker templates, log4j2 config, the broker POM."""
    conf = resources.files("kafka_sink.testing") / "conf"
    if isinstance(conf, Path) and (conf / _TEMPLATE_PROBE).is_file():
        return conf.resolve()
    raise KafkaSetupError(
        f"the broker templates ({conf}/{_TEMPLATE_PROBE} and the others in kafka_sink/testing/"
        "conf/, package data of pykafka-sink) are missing or not on a file system; reinstall "
        "the package from its wheel or a checkout (a zipped install cannot hand them to java)."
    )


def _pom_bytes() -> bytes:
    return (find_conf_dir() / BROKER_POM).read_bytes()


def pom_property(pom_name: str, name: str) -> str:
    """The property ``name`` of the packaged POM ``pom_name`` (e.g. the version it pins)."""
    root = ET.fromstring((find_conf_dir() / pom_name).read_bytes())
    value = root.findtext(f"m:properties/m:{name}", namespaces=_POM_NS)
    if not value:
        raise KafkaSetupError(f"{pom_name} has no <{name}> property")
    return value.strip()


def kafka_version() -> str:
    """The Kafka version the packaged POM pins (``<kafka.version>``)."""
    return pom_property(BROKER_POM, "kafka.version")


# -- locating things ---------------------------------------------------------------------------


def default_jars_dir() -> Path:
    """The per-user jars directory that ``fetch`` fills by default."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pykafka" / "kafka" / kafka_version() / "lib"


def _checkout_roots() -> list[Path]:
    package_root = Path(__file__).resolve().parents[2]
    roots = [package_root, Path.cwd(), *Path.cwd().parents]
    seen: list[Path] = []
    for root in roots:
        if root not in seen:
            seen.append(root)
    return seen


def _has_kafka_jar(directory: Path) -> bool:
    return directory.is_dir() and any(directory.glob("kafka_2.13-*.jar"))


def candidate_dirs(
    explicit: str | os.PathLike[str] | None, env: str, in_checkout: str, default: Path
) -> list[Path]:
    """Where to look, in order: ``explicit``, else ``$env``, else ``in_checkout`` (relative to a
    checkout's root) of each checkout around, then the per-user ``default``."""
    if explicit is not None:
        return [Path(explicit)]
    if os.environ.get(env):
        return [Path(os.environ[env])]
    return [*(root / in_checkout for root in _checkout_roots()), default]


def find_jars_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The directory holding the broker classpath (``kafka_2.13-*.jar`` and its dependencies)."""
    candidates = candidate_dirs(explicit, "KAFKA_JARS_DIR", ".cache/kafka/lib", default_jars_dir())
    for directory in candidates:
        if _has_kafka_jar(directory):
            return directory.resolve()
    raise KafkaSetupError(
        "Kafka broker jars not found (looked for kafka_2.13-*.jar in "
        + ", ".join(str(c) for c in candidates)
        + "). "
        + _FETCH_HINT.format(default=default_jars_dir())
    )


def find_java(explicit: str | None = None) -> str:
    """``java`` from the argument, ``$JAVA_HOME/bin`` or ``PATH``."""
    if explicit:
        return explicit
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise KafkaSetupError(
            "`java` not found (PATH or JAVA_HOME): a local Kafka, and Maven fetching its jars, "
            "need a JDK 17+. Install one (e.g. apt-get install openjdk-17-jdk-headless) or set "
            "JAVA_HOME."
        )
    return found


def find_mvn(explicit: str | None = None) -> str:
    """``mvn`` from the argument, ``$MAVEN_HOME/bin`` or ``PATH``."""
    if explicit:
        if shutil.which(explicit) is None:
            raise KafkaSetupError(f"Maven executable {explicit!r} not found or not executable")
        return explicit
    maven_home = os.environ.get("MAVEN_HOME")
    if maven_home and (Path(maven_home) / "bin" / "mvn").is_file():
        return str(Path(maven_home) / "bin" / "mvn")
    found = shutil.which("mvn")
    if found is None:
        raise KafkaSetupError(
            "`mvn` not found (PATH or MAVEN_HOME): fetching the Kafka broker jars needs Apache "
            "Maven 3.6.3+. Install it (e.g. apt-get install maven), pass --mvn, or put the jars "
            "of org.apache.kafka:kafka_2.13 and its runtime dependencies in a directory and set "
            "KAFKA_JARS_DIR to it."
        )
    return found


# -- fetching ----------------------------------------------------------------------------------


def _fetched_digest(directory: Path) -> str | None:
    try:
        return (directory / FETCHED_MARKER).read_text(encoding="ascii").strip()
    except OSError:
        return None


def _replaceable(directory: Path) -> bool:
    if not directory.is_dir():
        return False
    return (directory / FETCHED_MARKER).is_file() or not any(directory.iterdir())


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


class FetchOptions(TypedDict, total=False):
    """How a fetch runs Maven (every key optional).

    ``offline``: Maven's ``-o`` (only the local repository, ``~/.m2``); ``force``: fetch even if
    fetched; ``mvn`` / ``java``: the executables (default: found on ``PATH``); ``timeout_s``:
    Maven's bound (default: the fetch's own); ``log``: gets the progress lines.
    """

    offline: bool
    force: bool
    mvn: str | None
    java: str | None
    timeout_s: float
    log: Callable[[str], None] | None


def fetch_kafka_jars(
    dest: str | os.PathLike[str] | None = None, **options: Unpack[FetchOptions]
) -> Path:
    """Download the broker jars with Maven into ``dest``; return that directory.

    ``dest`` defaults to ``$KAFKA_JARS_DIR`` when set, else :func:`default_jars_dir`, which
    :func:`find_jars_dir` (and so ``LocalKafka``) searches without any setting. Maven gets 900 s
    unless ``timeout_s`` says otherwise.
    """
    if dest is None and os.environ.get("KAFKA_JARS_DIR"):
        dest = os.environ["KAFKA_JARS_DIR"]
    return fetch_with_maven(
        MavenFetch(
            what=f"Kafka {kafka_version()} broker jars",
            kind="jars directory",
            pom=_pom_bytes(),
            args=lambda staged: [
                MAVEN_COPY_GOAL,
                "-DincludeScope=runtime",
                f"-DoutputDirectory={staged}",
            ],
            staged=lambda work: work / "lib",
            expects="kafka_2.13-*.jar",
            error=KafkaSetupError,
        ),
        Path(dest) if dest is not None else default_jars_dir(),
        **options,
    )


@dataclass(frozen=True)
class MavenFetch:
    """What :func:`fetch_with_maven` builds: a POM, the goals run on it, where the result lands.

    ``args(staged)`` are Maven's goals and properties, ``staged(work)`` the directory Maven fills
    inside the scratch directory ``work`` (which holds ``pom.xml``); a directory holding a file
    that matches the glob ``expects`` is a finished result. ``error`` is the exception raised;
    ``what`` (plural) and ``kind`` name the result and its directory in messages; Maven gets
    ``timeout_s`` unless the caller's options say otherwise.
    """

    what: str
    kind: str
    pom: bytes
    args: Callable[[Path], list[str]]
    staged: Callable[[Path], Path]
    expects: str
    error: type[RuntimeError]
    timeout_s: float = _DEFAULT_FETCH_TIMEOUT_S

    def complete(self, directory: Path) -> bool:
        return directory.is_dir() and any(directory.glob(self.expects))


def fetch_with_maven(spec: MavenFetch, target: Path, **options: Unpack[FetchOptions]) -> Path:
    """Run Maven on ``spec.pom`` and put its result in ``target`` (see the module invariants)."""
    offline = options.get("offline", False)
    force = options.get("force", False)
    java = options.get("java")
    timeout_s = options.get("timeout_s", spec.timeout_s)
    say = options.get("log") or (lambda _message: None)
    target = target.expanduser().absolute()
    digest = hashlib.sha256(spec.pom).hexdigest()
    if not force and _fetched_digest(target) == digest and spec.complete(target):
        say(f"{spec.what} already in {target}")
        return target

    java_cmd = find_java(java)
    mvn_cmd = find_mvn(options.get("mvn"))
    env = dict(os.environ)
    if java is not None:
        # Maven runs on the JVM it finds through JAVA_HOME: make it the one asked for.
        env["JAVA_HOME"] = str(Path(shutil.which(java_cmd) or java_cmd).resolve().parents[1])

    if target.exists() and not _replaceable(target):
        raise spec.error(
            f"{target} exists and is not a {spec.kind} from an earlier fetch (no "
            f"{FETCHED_MARKER} in it): choose a new or empty directory, so nothing of yours is "
            "replaced."
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}-fetch-", dir=target.parent))
    try:
        (work / "pom.xml").write_bytes(spec.pom)
        staged = spec.staged(work)
        cmd = [mvn_cmd, "-B", "-q", *(["-o"] if offline else []), "-f", str(work / "pom.xml")]
        cmd += spec.args(staged)
        say(f"fetching {spec.what} with Maven into {target}")
        try:
            done = subprocess.run(
                cmd,
                cwd=work,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout if isinstance(exc.stdout, str) else ""
            raise spec.error(
                f"Maven did not finish resolving the {spec.what} within {timeout_s:.0f}s (a slow "
                f"or unreachable Maven repository?); it was stopped.\n{_tail(out)}"
            ) from None
        if done.returncode != 0:
            hint = (
                " Offline mode uses only ~/.m2: fetch once without --offline."
                if offline
                else " Check the network, or the mirror/proxy settings in ~/.m2/settings.xml."
            )
            raise spec.error(
                f"Maven failed (exit {done.returncode}) fetching the {spec.what}.{hint}\n"
                f"$ {' '.join(cmd)}\n{_tail(done.stdout + done.stderr)}"
            )
        if not spec.complete(staged):
            raise spec.error(
                f"Maven finished but left no {spec.expects} in {staged}; "
                f"$ {' '.join(cmd)}\n{_tail(done.stdout + done.stderr)}"
            )
        (staged / FETCHED_MARKER).write_text(digest + "\n", encoding="ascii")
        if target.exists():
            os.replace(target, work / "previous")
        os.replace(staged, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    say(f"{sum(1 for _ in target.rglob('*.jar'))} jars in {target}")
    return target
