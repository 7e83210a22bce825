"""A real Apache Kafka (KRaft, combined broker+controller nodes) on 127.0.0.1 for tests and demos.

``LocalKafka(nodes=1 | 3)`` runs the broker straight from the Maven Central jars fetched by
``python -m kafka_sink.testing fetch`` or ``make setup`` (found as described in
:mod:`kafka_sink.testing.prerequisites`: ``$KAFKA_JARS_DIR``, a checkout's ``.cache/kafka/lib``,
the per-user cache): for each node it renders the package-data template
``conf/broker-single.properties`` or ``conf/broker-cluster.properties`` into a temporary directory,
formats the node's storage with ``kafka.tools.StorageTool format`` (static voters, one cluster id,
so no quorum flag) and starts ``kafka.Kafka <server.properties>`` in its own session with stdout
going to ``<node dir>/node.log``.

Ready means: every running node logged ``Kafka Server started`` since its last start, answers a
Metadata request, and reports every running node as a live broker. Failing that before the
timeout raises :class:`KafkaStartError` carrying the tail of the node logs.

Invariants:
- Ports come from the OS (127.0.0.1:0). If a JVM loses a bind race, the whole start is retried
  once with fresh ports and a fresh directory.
- Optional extra client listeners (proxied, SASL_PLAINTEXT, mutual TLS) are added to every node;
  inter-broker and controller traffic always stays on PLAINTEXT, so tests can set up topics and
  read back through ``bootstrap_servers`` whatever the extra listener demands.
- A node keeps its ports and storage across ``stop_node``/``kill_node``/``start_node``.
- Nothing outlives the object: ``close()`` (also on context exit, at interpreter exit and on
  SIGTERM/SIGHUP when nobody else handles them) terminates every JVM (SIGTERM, then SIGKILL after a
  bounded wait, because a cluster that lost its quorum cannot finish a controlled shutdown) and
  removes the temporary directory. If the Python process is killed outright, the kernel kills the
  JVMs too (parent-death signal, Linux), and the next start removes the directory it left.

How a JVM child is started, waited for and stopped (own session, parent-death signal, bounded
SIGTERM then SIGKILL of its process group, log tails) is :mod:`kafka_sink.testing.jvm`, shared
with :mod:`kafka_sink.testing.s3`; this module adds what is Kafka's: formatting, readiness by
Metadata, node control and the process-wide cleanup of every live cluster.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from types import FrameType
from typing import Literal, Self

from kafka_sink.testing.certs import TestPki, make_test_pki
from kafka_sink.testing.jvm import (
    Service,
    free_ports,
    launch,
    lost_bind_race,
    signal_group,
    start_with_one_retry,
    stop,
    tail,
    wait_until_ready,
)
from kafka_sink.testing.prerequisites import (
    KafkaSetupError,
    find_conf_dir,
    find_jars_dir,
    find_java,
)
from kafka_sink.testing.probe import ClusterView, fetch_metadata
from kafka_sink.testing.proxy import TcpProxy

__all__ = [
    "KafkaSetupError",
    "KafkaStartError",
    "LocalKafka",
    "OAuthListener",
    "find_conf_dir",
    "find_jars_dir",
    "find_java",
]

STARTED_MESSAGE = "Kafka Server started"
_POLL_S = 0.2
_FORMAT_TIMEOUT_S = 120.0
# Every combined node waits about 5 s on shutdown for a quorum that is going away with it. The
# storage is thrown away on close, so nothing is lost by cutting that short.
_TEARDOWN_GRACE_S = 3.0
# A JVM writing its class-data archive at exit needs a few seconds more than a plain stop.
_CDS_DUMP_GRACE_S = 30.0

JvmProfile = Literal["test", "bench"]

# C1-only JIT and the serial collector: far less start-up CPU on a 2-core machine, at the cost of
# steady-state throughput, which short tests do not need.
_TEST_JVM_FLAGS = (
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:+ExitOnOutOfMemoryError",
    "-XX:-UsePerfData",  # no hsperfdata file left behind after a SIGKILL
    "-Djava.awt.headless=true",
)
# Kafka's own launch-script flags (kafka-run-class.sh), for benchmarks against the broker.
_BENCH_JVM_FLAGS = (
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-XX:+ExitOnOutOfMemoryError",
    "-XX:-UsePerfData",
    "-Djava.awt.headless=true",
)
_FORMAT_JVM_FLAGS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData")


@dataclass(frozen=True)
class OAuthListener:
    """A SASL_PLAINTEXT listener taking OAUTHBEARER only, validating signed JWTs (KIP-768).

    The broker's ``OAuthBearerValidatorCallbackHandler`` fetches the keys from ``jwks_url``
    (which must be up before the broker starts) and checks ``expected_audience`` /
    ``expected_issuer`` when given. ``allowed_urls`` is the JVM system property
    ``org.apache.kafka.sasl.oauthbearer.allowed.urls`` (default: ``jwks_url``), without which
    Kafka 4 refuses to fetch from any URL. ``reauth_ms`` is the listener's
    ``connections.max.reauth.ms`` (KIP-368: the session lifetime the broker grants; None: no
    re-authentication). ``server_config`` adds keys to the listener's OAUTHBEARER settings (the
    part after ``listener.name.oauth.oauthbearer.``).

    ``required_extensions`` (name -> value) or ``record_extensions=True`` swap in a callback
    handler compiled from the package's ``conf/ExtensionCheckingValidatorCallbackHandler.java``
    (``javac`` of the JDK, against the broker's jars, at each start): Kafka's validation plus
    SASL extensions that must arrive with those values (else the authentication fails), and a
    record of the extensions of every authentication (``LocalKafka.received_extensions()``).
    """

    jwks_url: str
    expected_audience: str | None = None
    expected_issuer: str | None = None
    allowed_urls: str | None = None
    reauth_ms: int | None = None
    server_config: Mapping[str, str] = field(default_factory=dict)
    required_extensions: Mapping[str, str] | None = None
    record_extensions: bool = False

    def __post_init__(self) -> None:
        for name, value in (self.required_extensions or {}).items():
            if not name.isalpha() or not name.isascii() or any(c in value for c in ",\n"):
                raise ValueError("required extensions: names of letters, values without , or \\n")

    @property
    def checks_extensions(self) -> bool:
        return self.required_extensions is not None or self.record_extensions

    def properties(self) -> str:
        prefix = "listener.name.oauth.oauthbearer"
        lines = [
            "",
            "# OAUTHBEARER listener: signed JWTs checked against a JWKS endpoint",
            "listener.name.oauth.sasl.enabled.mechanisms=OAUTHBEARER",
            f"{prefix}.sasl.jaas.config="
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;",
            f"{prefix}.sasl.server.callback.handler.class="
            + (_EXTENSION_HANDLER if self.checks_extensions else _KAFKA_VALIDATOR),
            f"sasl.oauthbearer.jwks.endpoint.url={self.jwks_url}",
        ]
        if self.expected_audience is not None:
            lines.append(f"sasl.oauthbearer.expected.audience={self.expected_audience}")
        if self.expected_issuer is not None:
            lines.append(f"sasl.oauthbearer.expected.issuer={self.expected_issuer}")
        if self.reauth_ms is not None:
            lines.append(f"{prefix}.connections.max.reauth.ms={self.reauth_ms}")
        lines += [f"{prefix}.{k}={v}" for k, v in self.server_config.items()]
        return "\n".join(lines) + "\n"

    def jvm_flags(self, extensions_log: Path | None = None) -> list[str]:
        urls = self.allowed_urls or self.jwks_url
        flags = [f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={urls}"]
        if self.required_extensions:
            pairs = ",".join(f"{k}={v}" for k, v in self.required_extensions.items())
            flags.append(f"-Dpykafka.oauth.required.extensions={pairs}")
        if extensions_log is not None:
            flags.append(f"-Dpykafka.oauth.extensions.log={extensions_log}")
        return flags


_EXTENSION_HANDLER = "pykafka.testing.ExtensionCheckingValidatorCallbackHandler"
_KAFKA_VALIDATOR = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
)
_EXTENSION_HANDLER_SOURCE = "ExtensionCheckingValidatorCallbackHandler.java"


def _compile_extension_handler(java: str, jars: Path, conf: Path, out: Path) -> Path:
    """Compile the extension-checking handler against the broker's jars into ``out``."""
    javac = Path(os.path.realpath(java)).parent / "javac"
    javac_path = str(javac) if javac.is_file() else shutil.which("javac")
    if javac_path is None:
        raise KafkaSetupError(
            "`javac` not found next to java or on PATH: OAuthListener(required_extensions=...) "
            "compiles a broker callback handler and needs a JDK (e.g. openjdk-17-jdk-headless)"
        )
    out.mkdir(parents=True, exist_ok=True)
    log_path = out / "javac.log"
    with log_path.open("wb") as fh:
        proc = subprocess.run(
            [
                javac_path,
                "-nowarn",
                "-cp",
                str(jars / "*"),
                "-d",
                str(out),
                str(conf / _EXTENSION_HANDLER_SOURCE),
            ],
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=_FORMAT_TIMEOUT_S,
            check=False,
        )
    if proc.returncode != 0:
        raise KafkaStartError(f"javac failed for {_EXTENSION_HANDLER_SOURCE}:\n{tail(log_path)}")
    return out


class KafkaStartError(RuntimeError):
    """A node did not become ready (or exited); the message carries its log tail."""


class _PortRaceError(KafkaStartError):
    """A node could not bind a port picked a moment earlier: retry with fresh ports."""


def _kafka_uuid() -> str:
    # Kafka's Uuid text form (22 chars of URL-safe base64). A leading "-" would be read as an
    # option by the command line parser, which is why Kafka's own randomUuid() avoids it too.
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not text.startswith("-"):
            return text


def _cds_archive_path(java: str, jars: Path) -> Path:
    """Where the class-data-sharing archive for this JVM and this classpath lives.

    A dynamic CDS archive is valid only for the JVM build and the exact classpath it was dumped
    with (a mismatch is detected by the JVM, which then runs without it), so both are in the name.
    """
    key = hashlib.sha256()
    real_java = os.path.realpath(java)
    key.update(real_java.encode())
    with contextlib.suppress(OSError):
        key.update(str(os.stat(real_java).st_mtime_ns).encode())
    for jar in sorted(jars.glob("*.jar")):
        key.update(jar.name.encode())
    return jars.parent / "cds" / f"kafka-{key.hexdigest()[:16]}.jsa"


# -- process-wide cleanup ---------------------------------------------------------------------

_WORKDIR_PREFIX = "kafka-sink-local-"
_OWNER_FILE = "owner.pid"


def _sweep_orphaned_workdirs() -> None:
    """Remove temporary directories left by harness processes that were killed outright."""
    for directory in Path(tempfile.gettempdir()).glob(_WORKDIR_PREFIX + "*"):
        try:
            owner = int((directory / _OWNER_FILE).read_text(encoding="ascii"))
        except (OSError, ValueError):
            continue  # not ours, or still being created
        try:
            os.kill(owner, 0)
        except ProcessLookupError:
            shutil.rmtree(directory, ignore_errors=True)
        except PermissionError:
            continue  # another user's live process


_LIVE: set[LocalKafka] = set()
_LIVE_LOCK = threading.Lock()
_HOOKS_INSTALLED = False


def _close_all() -> None:
    with _LIVE_LOCK:
        clusters = list(_LIVE)
    for cluster in clusters:
        with contextlib.suppress(Exception):
            cluster.close()


def _on_fatal_signal(signum: int, frame: FrameType | None) -> None:
    _close_all()
    # Then die of the same signal, as if no handler had been installed.
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install_cleanup_hooks() -> None:
    global _HOOKS_INSTALLED  # noqa: PLW0603 - process-wide, installed once
    if _HOOKS_INSTALLED:
        return
    _HOOKS_INSTALLED = True
    atexit.register(_close_all)
    # Python runs neither atexit nor finally blocks on SIGTERM/SIGHUP; without a handler the JVMs
    # (in their own sessions, so not signalled with us) would outlive the test run.
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(signum) in (signal.SIG_DFL, None):
                signal.signal(signum, _on_fatal_signal)


# -- the cluster ------------------------------------------------------------------------------


@dataclass
class _Node:
    node_id: int
    port: int
    controller_port: int
    proxied_port: int | None
    sasl_port: int | None
    mtls_port: int | None
    oauth_port: int | None
    directory: Path
    process: subprocess.Popen[bytes] | None = None
    log_offset: int = 0
    started_seen: bool = False
    # Temporary path this JVM dumps its class-data archive to at exit (first run only).
    cds_dump: Path | None = None
    # False after stop_node/kill_node: the node is down on purpose, readiness ignores it.
    wanted: bool = False

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def log_path(self) -> Path:
        return self.directory / "node.log"

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def new_log_text(self) -> str:
        try:
            with self.log_path.open("rb") as fh:
                fh.seek(self.log_offset)
                return fh.read().decode("utf-8", errors="replace")
        except OSError:
            return ""


class LocalKafka(Service):
    """A 1- or 3-node Apache Kafka on 127.0.0.1, started from the Maven jars.

    ``heap`` is the per-node maximum heap (``-Xmx``, e.g. ``"384m"``); the default is 512m for one
    node and 384m per node for three. ``jvm_profile="bench"`` uses Kafka's production JVM flags
    with a 1g heap instead of the start-up-optimised test flags. ``broker_config`` adds or
    overrides server properties on every node. With ``proxied=True`` every node gets a second
    client listener advertised behind a :class:`TcpProxy` (``.proxy(node_id)``,
    ``.proxied_bootstrap_servers``): clients bootstrapping there only ever talk through proxies.
    ``sasl_users`` (``{name: password}``) adds a SASL_PLAINTEXT listener on every node
    (``.sasl_bootstrap_servers``) accepting PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 for those users
    (SCRAM credentials are written at format time); inter-broker traffic stays on PLAINTEXT.
    ``mtls=True`` adds an SSL listener on every node (``.mtls_bootstrap_servers``) with
    ``ssl.client.auth=required``, PEM keystore and truststore: a throwaway PKI is made with the
    ``openssl`` tool for each start (``.pki``: the CA, the broker's certificate, a client key and
    certificate the broker trusts, and one from a CA it does not know).
    ``transaction_version`` formats the cluster with that finalized ``transaction.version``
    feature (1: Transactions V1, to prove the older protocol path; None: the release default,
    2 on Kafka 4.x).
    ``oauth`` (an :class:`OAuthListener`, e.g. from
    :meth:`kafka_sink.testing.oidc.LocalOidc.broker_listener`) adds a SASL_PLAINTEXT listener on
    every node (``.oauth_bootstrap_servers``) that takes OAUTHBEARER only and validates the
    tokens' signatures against a JWKS endpoint.
    ``share_classes`` (test profile only) reuses a class-data-sharing archive kept next to the
    jars, which cuts JVM start-up by about a third; the first run writes it when a node stops.
    """

    def __init__(
        self,
        nodes: int = 1,
        *,
        heap: str | None = None,
        jvm_profile: JvmProfile = "test",
        startup_timeout_s: float = 120.0,
        stop_timeout_s: float = 15.0,
        broker_config: Mapping[str, str] | None = None,
        proxied: bool = False,
        sasl_users: Mapping[str, str] | None = None,
        mtls: bool = False,
        share_classes: bool = True,
        jars_dir: str | os.PathLike[str] | None = None,
        java: str | None = None,
        transaction_version: int | None = None,
        oauth: OAuthListener | None = None,
    ) -> None:
        if nodes not in (1, 3):
            raise ValueError(f"nodes must be 1 or 3, not {nodes}")
        if jvm_profile not in ("test", "bench"):
            raise ValueError(f"jvm_profile must be 'test' or 'bench', not {jvm_profile!r}")
        self.nodes = nodes
        self.jvm_profile: JvmProfile = jvm_profile
        self.heap = heap or ("1g" if jvm_profile == "bench" else "512m" if nodes == 1 else "384m")
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.broker_config = dict(broker_config or {})
        self.proxied = proxied
        self._sasl_users = dict(sasl_users or {})
        for name, password in self._sasl_users.items():
            # They go into a JAAS line and StorageTool's [name=..,password=..] syntax unquoted.
            if not name or any(c in name + password for c in '"\\,=[]; \n'):
                raise ValueError("SASL user names and passwords must be plain tokens")
        self.mtls = mtls
        if transaction_version is not None and transaction_version not in (0, 1, 2):
            raise ValueError(f"transaction_version must be 0, 1 or 2, not {transaction_version}")
        self.transaction_version = transaction_version
        self.oauth = oauth
        self._extensions_log: Path | None = None
        self._pki: TestPki | None = None
        self._jars_dir_arg = jars_dir
        self._share_classes = share_classes and jvm_profile == "test"
        self._cds_archive: Path | None = None
        self._java_arg = java
        self._nodes: dict[int, _Node] = {}
        self._proxies: dict[int, TcpProxy] = {}
        self._workdir: Path | None = None
        self._cluster_id = ""
        self.startup_s: float | None = None

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> Self:
        """Format and start every node, then wait until the cluster is ready."""
        if self._workdir is not None:
            raise RuntimeError("LocalKafka already started")
        java = find_java(self._java_arg)
        jars = find_jars_dir(self._jars_dir_arg)
        conf = find_conf_dir()
        if self._share_classes:
            self._cds_archive = _cds_archive_path(java, jars)
        _install_cleanup_hooks()
        with _LIVE_LOCK:
            _LIVE.add(self)
        self.startup_s = start_with_one_retry(
            lambda: self._start_once(java, jars, conf), self._teardown, self.close, _PortRaceError
        )
        return self

    def close(self) -> None:
        """Stop every node (bounded), remove the temporary directory. Idempotent."""
        try:
            self._teardown()
        finally:
            with _LIVE_LOCK:
                _LIVE.discard(self)

    def __repr__(self) -> str:
        return f"LocalKafka(nodes={self.nodes}, bootstrap_servers={self.bootstrap_servers!r})"

    # -- public properties --------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        """Every node's client listener, ``"127.0.0.1:p1,127.0.0.1:p2,..."``."""
        return ",".join(f"127.0.0.1:{n.port}" for n in self._nodes.values())

    @property
    def proxied_bootstrap_servers(self) -> str:
        """The proxies in front of every node (only with ``proxied=True``)."""
        if not self.proxied:
            raise RuntimeError("LocalKafka(proxied=True) is needed for proxied_bootstrap_servers")
        return ",".join(p.address for p in self._proxies.values())

    @property
    def sasl_bootstrap_servers(self) -> str:
        """Every node's SASL_PLAINTEXT listener (only with ``sasl_users``)."""
        if not self._sasl_users:
            raise RuntimeError("LocalKafka(sasl_users=...) is needed for sasl_bootstrap_servers")
        return ",".join(f"127.0.0.1:{n.sasl_port}" for n in self._nodes.values())

    @property
    def mtls_bootstrap_servers(self) -> str:
        """Every node's mutual-TLS listener (SSL, client certificate required; ``mtls=True``)."""
        if not self.mtls:
            raise RuntimeError("LocalKafka(mtls=True) is needed for mtls_bootstrap_servers")
        return ",".join(f"127.0.0.1:{n.mtls_port}" for n in self._nodes.values())

    @property
    def oauth_bootstrap_servers(self) -> str:
        """Every node's OAUTHBEARER listener (SASL_PLAINTEXT; only with ``oauth``)."""
        if self.oauth is None:
            raise RuntimeError("LocalKafka(oauth=...) is needed for oauth_bootstrap_servers")
        return ",".join(f"127.0.0.1:{n.oauth_port}" for n in self._nodes.values())

    def received_extensions(self) -> list[dict[str, str]]:
        """The SASL extensions of every OAUTHBEARER authentication so far, in order (only with
        ``OAuthListener(required_extensions=...)`` or ``record_extensions=True``)."""
        if self._extensions_log is None:
            raise RuntimeError("the OAuth listener does not record extensions")
        try:
            text = self._extensions_log.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        return [
            dict(pair.split("=", 1) for pair in line.split("\t") if pair)
            for line in text.splitlines()
        ]

    @property
    def pki(self) -> TestPki:
        """The certificates of the mutual-TLS listener (valid while the cluster runs)."""
        if self._pki is None:
            raise RuntimeError("LocalKafka(mtls=True) must be started before its pki is used")
        return self._pki

    def proxy(self, node_id: int) -> TcpProxy:
        if not self.proxied:
            raise RuntimeError("LocalKafka(proxied=True) is needed for proxies")
        return self._proxies[node_id]

    @property
    def node_ids(self) -> list[int]:
        return list(self._nodes)

    @property
    def running_node_ids(self) -> list[int]:
        return [i for i, n in self._nodes.items() if n.running()]

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    @property
    def workdir(self) -> Path | None:
        """The temporary directory holding every node's config, data and log (None when closed)."""
        return self._workdir

    def address_of(self, node_id: int) -> str:
        return f"127.0.0.1:{self._nodes[node_id].port}"

    def pid_of(self, node_id: int) -> int | None:
        proc = self._nodes[node_id].process
        return proc.pid if proc is not None and proc.poll() is None else None

    def returncode(self, node_id: int) -> int | None:
        """The node's last exit status (None while it runs or before it ever ran)."""
        proc = self._nodes[node_id].process
        return None if proc is None else proc.poll()

    def node_log(self, node_id: int) -> str:
        """The node's whole log (WARN and above, plus start-up lines)."""
        try:
            return self._nodes[node_id].log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def metadata(self, topics: list[str] | None = None, node_id: int | None = None) -> ClusterView:
        """Metadata as one running node (the first by default) reports it."""
        ids = [node_id] if node_id is not None else self.running_node_ids
        if not ids:
            raise RuntimeError("no node is running")
        return fetch_metadata("127.0.0.1", self._nodes[ids[0]].port, topics)

    def leader_of(self, topic: str, partition: int = 0) -> int:
        """The current leader's node id for a partition (-1 when there is none)."""
        view = self.metadata([topic])
        state = view.topics.get(topic)
        if state is None or partition not in state.partitions:
            return -1
        return state.partitions[partition].leader_id

    # -- node control -------------------------------------------------------------------------
    def stop_node(self, node_id: int, timeout_s: float | None = None) -> None:
        """Graceful stop (SIGTERM: controlled shutdown); SIGKILL once the bound has passed."""
        node = self._nodes[node_id]
        node.wanted = False
        self._terminate([node], timeout_s if timeout_s is not None else self.stop_timeout_s)

    def kill_node(self, node_id: int) -> None:
        """Hard stop (SIGKILL), as a crash or power loss."""
        node = self._nodes[node_id]
        node.wanted = False
        if node.process is not None and node.process.poll() is None:
            signal_group(node.process, signal.SIGKILL)
            node.process.wait()
        self._finish_cds_dump(node)

    def start_node(self, node_id: int, *, wait: bool = True) -> None:
        """Restart a stopped node with its ports and storage, then wait for the whole cluster."""
        node = self._nodes[node_id]
        if node.running():
            raise RuntimeError(f"node {node_id} is already running")
        self._launch(node)
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout_s: float | None = None) -> None:
        """Block until every running node is started and sees every running node as a broker."""
        bound_s = timeout_s or self.startup_timeout_s
        problem = wait_until_ready(self._readiness_problem, bound_s, _POLL_S)
        if problem is not None:
            raise KafkaStartError(
                f"Kafka not ready after {bound_s:.0f}s: {problem}\n{self._log_tails()}"
            )

    # -- internals ----------------------------------------------------------------------------
    def _start_once(self, java: str, jars: Path, conf: Path) -> None:
        self._java = java
        self._classpath = str(jars / "*")
        self._extensions_log = None
        self._log4j = conf / "log4j2-broker.properties"
        template_name = (
            "broker-single.properties" if self.nodes == 1 else "broker-cluster.properties"
        )
        template = Template((conf / template_name).read_text(encoding="utf-8"))
        _sweep_orphaned_workdirs()
        self._workdir = Path(tempfile.mkdtemp(prefix=_WORKDIR_PREFIX))
        (self._workdir / _OWNER_FILE).write_text(str(os.getpid()), encoding="ascii")
        self._cluster_id = _kafka_uuid()
        if self.oauth is not None and self.oauth.checks_extensions:
            classes = _compile_extension_handler(java, jars, conf, self._workdir / "classes")
            self._classpath += os.pathsep + str(classes)
            self._extensions_log = self._workdir / "oauth-extensions.log"
        if self.mtls:
            pki_dir = self._workdir / "pki"
            pki_dir.mkdir()
            try:
                self._pki = make_test_pki(pki_dir)
            except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
                raise KafkaSetupError(f"cannot make the mutual-TLS certificates: {exc}") from exc
        per_node = 2 + int(self.proxied) + int(bool(self._sasl_users)) + int(self.mtls)
        per_node += int(self.oauth is not None)
        ports = iter(free_ports(self.nodes * per_node))
        self._nodes = {}
        for index in range(self.nodes):
            node_id = index + 1
            node = _Node(
                node_id=node_id,
                port=next(ports),
                controller_port=next(ports),
                proxied_port=next(ports) if self.proxied else None,
                sasl_port=next(ports) if self._sasl_users else None,
                mtls_port=next(ports) if self.mtls else None,
                oauth_port=next(ports) if self.oauth is not None else None,
                directory=self._workdir / f"node-{node_id}",
            )
            node.directory.mkdir()
            self._nodes[node_id] = node
            if node.proxied_port is not None:
                self._proxies[node_id] = TcpProxy("127.0.0.1", node.proxied_port)
        voters = ",".join(
            f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self._nodes.values()
        )
        for node in self._nodes.values():
            self._render(template, node, voters)
        self._format(self._nodes.values())
        for node in self._nodes.values():
            self._launch(node)
        self.wait_ready()

    def _render(self, template: Template, node: _Node, voters: str) -> None:
        extra_listeners = extra_advertised = extra_map = ""
        if node.proxied_port is not None:
            proxy = self._proxies[node.node_id]
            extra_listeners = f",PROXIED://127.0.0.1:{node.proxied_port}"
            extra_advertised = f",PROXIED://{proxy.address}"
            extra_map = ",PROXIED:PLAINTEXT"
        sasl_lines = ""
        if node.sasl_port is not None:
            extra_listeners += f",SASL_PLAINTEXT://127.0.0.1:{node.sasl_port}"
            extra_advertised += f",SASL_PLAINTEXT://127.0.0.1:{node.sasl_port}"
            extra_map += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
            plain_users = " ".join(f'user_{u}="{p}"' for u, p in self._sasl_users.items())
            prefix = "listener.name.sasl_plaintext"
            sasl_lines = (
                "\n# SASL listener for client authentication tests\n"
                "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512\n"
                f"{prefix}.plain.sasl.jaas.config="
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};\n"
                f"{prefix}.scram-sha-256.sasl.jaas.config="
                "org.apache.kafka.common.security.scram.ScramLoginModule required;\n"
                f"{prefix}.scram-sha-512.sasl.jaas.config="
                "org.apache.kafka.common.security.scram.ScramLoginModule required;\n"
            )
        mtls_lines = ""
        if node.mtls_port is not None:
            assert self._pki is not None
            extra_listeners += f",MTLS://127.0.0.1:{node.mtls_port}"
            extra_advertised += f",MTLS://127.0.0.1:{node.mtls_port}"
            extra_map += ",MTLS:SSL"
            prefix = "listener.name.mtls"
            mtls_lines = (
                "\n# Mutual-TLS listener: every client must present a certificate the CA signed\n"
                f"{prefix}.ssl.client.auth=required\n"
                f"{prefix}.ssl.keystore.type=PEM\n"
                f"{prefix}.ssl.keystore.location={self._pki.broker_keystore}\n"
                f"{prefix}.ssl.truststore.type=PEM\n"
                f"{prefix}.ssl.truststore.location={self._pki.ca}\n"
            )
        oauth_lines = ""
        if node.oauth_port is not None:
            assert self.oauth is not None
            extra_listeners += f",OAUTH://127.0.0.1:{node.oauth_port}"
            extra_advertised += f",OAUTH://127.0.0.1:{node.oauth_port}"
            extra_map += ",OAUTH:SASL_PLAINTEXT"
            oauth_lines = self.oauth.properties()
        text = template.substitute(
            node_id=node.node_id,
            port=node.port,
            controller_port=node.controller_port,
            quorum_voters=voters,
            log_dir=node.data_dir,
            extra_listeners=extra_listeners,
            extra_advertised=extra_advertised,
            extra_protocol_map=extra_map,
        )
        text += sasl_lines + mtls_lines + oauth_lines
        if self.broker_config:
            text += "\n# overrides\n" + "".join(f"{k}={v}\n" for k, v in self.broker_config.items())
        node.config_path.write_text(text, encoding="utf-8")

    def _jvm_base(self) -> list[str]:
        return [self._java, f"-Dlog4j2.configurationFile={self._log4j}", "-cp", self._classpath]

    def _format(self, nodes: Iterable[_Node]) -> None:
        # Formats are independent: run them side by side to halve the JVM start-up cost.
        running: list[tuple[_Node, subprocess.Popen[bytes], Path]] = []
        for node in nodes:
            out = node.directory / "format.log"
            with out.open("wb") as fh:
                cmd = [self._java, *_FORMAT_JVM_FLAGS, *self._jvm_base()[1:]]
                cmd += ["kafka.tools.StorageTool", "format", "-t", self._cluster_id]
                cmd += ["-c", str(node.config_path)]
                if self.transaction_version is not None:
                    cmd += ["--feature", f"transaction.version={self.transaction_version}"]
                for user, password in self._sasl_users.items():
                    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                        cmd += ["-S", f"{mechanism}=[name={user},password={password}]"]
                proc = subprocess.Popen(
                    cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
                )
            running.append((node, proc, out))
        failures: list[str] = []
        for node, proc, out in running:
            try:
                rc = proc.wait(timeout=_FORMAT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                rc = -1
            if rc != 0:
                failures.append(f"node {node.node_id} (exit {rc}):\n{tail(out)}")
        if failures:
            raise KafkaStartError("StorageTool format failed for " + "\n".join(failures))

    def _jvm_flags(self) -> list[str]:
        if self.jvm_profile == "bench":
            return [f"-Xms{self.heap}", f"-Xmx{self.heap}", *_BENCH_JVM_FLAGS]
        return [f"-Xms{self._half(self.heap)}", f"-Xmx{self.heap}", *_TEST_JVM_FLAGS]

    @staticmethod
    def _half(heap: str) -> str:
        digits = heap.rstrip("kKmMgG")
        unit = heap[len(digits) :] or ""
        try:
            return f"{max(int(digits) // 2, 1)}{unit}"
        except ValueError:
            return heap

    def _cds_flags(self, node: _Node) -> list[str]:
        archive = self._cds_archive
        if archive is None:
            return []
        if archive.is_file():
            return [f"-XX:SharedArchiveFile={archive}"]
        if any(n.cds_dump is not None for n in self._nodes.values()):
            return []  # one dumping node per cluster is enough
        try:
            archive.parent.mkdir(parents=True, exist_ok=True)
        except OSError:
            return []
        # Unique name: parallel test runs may dump at the same time; the rename is atomic.
        node.cds_dump = archive.parent / f".{archive.name}.{os.getpid()}.{node.node_id}.tmp"
        return [f"-XX:ArchiveClassesAtExit={node.cds_dump}"]

    def _finish_cds_dump(self, node: _Node) -> None:
        tmp = node.cds_dump
        if tmp is None or self._cds_archive is None:
            return
        node.cds_dump = None
        proc = node.process
        clean_exit = proc is not None and proc.poll() in (0, 143)
        try:
            if clean_exit and tmp.is_file() and tmp.stat().st_size > 0:
                os.replace(tmp, self._cds_archive)
            else:
                tmp.unlink(missing_ok=True)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)

    def _launch(self, node: _Node) -> None:
        node.log_offset = node.log_path.stat().st_size if node.log_path.exists() else 0
        node.started_seen = False
        node.wanted = True
        cmd = [self._java, *self._jvm_flags(), *self._cds_flags(node), *self._jvm_base()[1:]]
        if self.oauth is not None:
            cmd[1:1] = self.oauth.jvm_flags(self._extensions_log)
        cmd += ["kafka.Kafka", str(node.config_path)]
        node.process = launch(cmd, node.log_path, node.directory)

    def _readiness_problem(self) -> str | None:
        running = [n for n in self._nodes.values() if n.wanted and n.process is not None]
        for node in running:
            assert node.process is not None
            rc = node.process.poll()
            if rc is not None:
                text = node.new_log_text()
                message = f"node {node.node_id} exited with {rc}\n{tail(node.log_path)}"
                if lost_bind_race(text):
                    raise _PortRaceError(message)
                raise KafkaStartError(message)
            if not node.started_seen:
                if STARTED_MESSAGE not in node.new_log_text():
                    return f"node {node.node_id} has not logged {STARTED_MESSAGE!r} yet"
                node.started_seen = True
        expected = {n.node_id for n in running}
        for node in running:
            try:
                view = fetch_metadata("127.0.0.1", node.port, [], timeout_s=2.0)
            except (OSError, ValueError) as exc:
                return f"node {node.node_id} does not answer Metadata: {exc}"
            if set(view.brokers) != expected:
                return (
                    f"node {node.node_id} sees brokers {sorted(view.brokers)}, "
                    f"expected {sorted(expected)}"
                )
        return None

    def _log_tails(self) -> str:
        parts = []
        for node in self._nodes.values():
            parts.append(f"--- node {node.node_id} log tail ({node.log_path}) ---")
            parts.append(tail(node.log_path))
        return "\n".join(parts)

    def _terminate(self, nodes: Iterable[_Node], timeout_s: float) -> None:
        nodes = list(nodes)
        # The dumping node last: the others' bounded stops must not wait behind its dump.
        stop(
            (node.process, max(timeout_s, _CDS_DUMP_GRACE_S) if node.cds_dump else timeout_s)
            for node in sorted(nodes, key=lambda n: n.cds_dump is not None)
            if node.process is not None
        )
        for node in nodes:
            self._finish_cds_dump(node)

    def _teardown(self) -> None:
        nodes = list(self._nodes.values())
        if nodes:
            # All at once and bounded: stopping nodes one by one would make the last ones wait on
            # a quorum that is already gone.
            self._terminate(nodes, min(self.stop_timeout_s, _TEARDOWN_GRACE_S))
        for proxy in self._proxies.values():
            proxy.close()
        self._proxies = {}
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
        for node in nodes:
            node.process = None
            node.wanted = False
        self._pki = None
