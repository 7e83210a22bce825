"""A real Prometheus Pushgateway on 127.0.0.1 for the sink's metrics tests: ``LocalPushgateway``.

Role: the Pushgateway is one static Go binary; :func:`fetch_pushgateway` takes it from the
Debian package ``prometheus-pushgateway`` (``apt-get download``, then ``dpkg -x``) into
``$PUSHGATEWAY_DIR`` or a per-user cache (``make setup`` fills ``.cache/pushgateway``), and
:class:`LocalPushgateway` runs it in memory (no persistence file) on a free port, ready once
``GET /-/ready`` answers 200. :meth:`LocalPushgateway.metrics` reads what it holds back over its
HTTP API (``/api/v1/metrics``). Given ``basic_auth``, it starts with a ``--web.config.file``
that asks every request for those credentials, as a secured gateway does.

Invariants:
- The binary is looked for in: the directory given, else ``$PUSHGATEWAY_DIR``, else
  ``.cache/pushgateway`` of a checkout, else the per-user cache; missing, the setup error says
  how to fetch it.
- Every wait is bounded (start, probes, reads); the process is stopped and its directory removed
  on close, also after a failed start (``jvm.JvmServer``'s life, which any child process shares).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafka_sink.testing.jvm import JvmServer, http_ready_problem
from kafka_sink.testing.prerequisites import KafkaSetupError, candidate_dirs

__all__ = [
    "LocalPushgateway",
    "PushgatewaySetupError",
    "PushgatewayStartError",
    "fetch_pushgateway",
    "find_pushgateway",
]

BINARY = "prometheus-pushgateway"
DEBIAN_PACKAGE = "prometheus-pushgateway"
_PROBE_TIMEOUT_S = 2.0
_FETCH_TIMEOUT_S = 300.0
_FETCH_HINT = (
    "Run `python -m kafka_sink.testing fetch pushgateway` (needs apt-get and dpkg, as on Debian "
    "or Ubuntu) to put it into {default}, run `make setup` in a checkout of the repository, or "
    "set PUSHGATEWAY_DIR to a directory holding the prometheus-pushgateway binary."
)


class PushgatewaySetupError(KafkaSetupError):
    """The Pushgateway binary is missing and cannot be fetched here."""


class PushgatewayStartError(RuntimeError):
    """The Pushgateway did not start or did not become ready in time."""


class _PortRaceError(PushgatewayStartError):
    """It lost its port to another process; a start with fresh ports follows."""


def default_pushgateway_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pykafka" / "pushgateway"


def find_pushgateway(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The Pushgateway binary (see the module docstring for where it is looked for)."""
    candidates = candidate_dirs(
        explicit, "PUSHGATEWAY_DIR", ".cache/pushgateway", default_pushgateway_dir()
    )
    for directory in candidates:
        binary = directory / BINARY
        if binary.is_file() and os.access(binary, os.X_OK):
            return binary.resolve()
    raise PushgatewaySetupError(
        f"Pushgateway binary not found (looked for {BINARY} in "
        + ", ".join(str(c) for c in candidates)
        + "). "
        + _FETCH_HINT.format(default=default_pushgateway_dir())
    )


def fetch_pushgateway(
    dest: str | os.PathLike[str] | None = None,
    *,
    force: bool = False,
    log: Callable[[str], None] | None = None,
    timeout_s: float = _FETCH_TIMEOUT_S,
    **_: Any,
) -> Path:
    """Put the binary of Debian's ``prometheus-pushgateway`` into ``dest`` (default
    ``$PUSHGATEWAY_DIR``, else :func:`default_pushgateway_dir`); returns the directory."""
    if dest is None:
        dest = os.environ.get("PUSHGATEWAY_DIR") or default_pushgateway_dir()
    target = Path(dest)
    if (target / BINARY).is_file() and not force:
        return target.resolve()
    for tool in ("apt-get", "dpkg"):
        if shutil.which(tool) is None:
            raise PushgatewaySetupError(f"{tool} not found. " + _FETCH_HINT.format(default=target))
    with tempfile.TemporaryDirectory(prefix="kafka-sink-pushgateway-") as work:
        if log is not None:
            log(f"apt-get download {DEBIAN_PACKAGE}")
        _run(["apt-get", "download", DEBIAN_PACKAGE], work, timeout_s, target)
        debs = sorted(Path(work).glob("*.deb"))
        if not debs:
            raise PushgatewaySetupError(f"apt-get download left no .deb in {work}")
        _run(["dpkg", "-x", str(debs[0]), str(Path(work) / "root")], work, timeout_s, target)
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy2(Path(work) / "root" / "usr" / "bin" / BINARY, target / BINARY)
    return target.resolve()


def _run(cmd: list[str], cwd: str, timeout_s: float, target: Path) -> None:
    try:
        subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, timeout=timeout_s)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        output = exc.stderr or b""
        raise PushgatewaySetupError(
            f"{' '.join(cmd)} failed: {output.decode(errors='replace')[-500:]} "
            + _FETCH_HINT.format(default=target)
        ) from None


class LocalPushgateway(JvmServer):
    """A Prometheus Pushgateway (in memory) on 127.0.0.1; :attr:`url` is where to push."""

    name = "the Pushgateway"
    log_name = "pushgateway.log"
    workdir_prefix = "kafka-sink-pushgateway-"
    start_error = PushgatewayStartError
    port_race_error = _PortRaceError
    poll_s = 0.1
    stop_timeout_s = 5.0

    def __init__(
        self,
        *,
        startup_timeout_s: float = 30.0,
        directory: str | os.PathLike[str] | None = None,
        basic_auth: tuple[str, str, str] | None = None,
    ) -> None:
        """``basic_auth`` = (user, password, bcrypt hash of the password): every request, the
        readiness probe and :meth:`metrics` included, then needs those credentials."""
        super().__init__(startup_timeout_s=startup_timeout_s)
        self._directory_arg = directory
        self._binary = Path()
        self._basic_auth = basic_auth

    def __repr__(self) -> str:
        return f"LocalPushgateway(url={self.url!r})"

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def metrics(self) -> list[dict[str, Any]]:
        """The metric groups the gateway holds (``GET /api/v1/metrics``'s ``data``)."""
        with urllib.request.urlopen(
            self._request(f"{self.url}/api/v1/metrics"), timeout=_PROBE_TIMEOUT_S * 5
        ) as response:
            body = json.loads(response.read())
        data: list[dict[str, Any]] = body["data"]
        return data

    def _request(self, url: str) -> urllib.request.Request:
        request = urllib.request.Request(url)
        if self._basic_auth is not None:
            user, password, _ = self._basic_auth
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        return request

    # -- internals ----------------------------------------------------------------------------
    def _resolve(self) -> None:
        self._binary = find_pushgateway(self._directory_arg)

    def _command(self) -> list[str]:
        command = [str(self._binary), f"--web.listen-address=127.0.0.1:{self._port}"]
        if self._basic_auth is not None:
            user, _, hashed = self._basic_auth
            config = self.workdir / "web-config.yml"
            config.write_text(f"basic_auth_users:\n  {json.dumps(user)}: {json.dumps(hashed)}\n")
            command.append(f"--web.config.file={config}")
        return command

    def _ready_problem(self, log: Path) -> str | None:
        if self._basic_auth is None:
            return http_ready_problem(f"{self.url}/-/ready", _PROBE_TIMEOUT_S)
        try:
            with urllib.request.urlopen(
                self._request(f"{self.url}/-/ready"), timeout=_PROBE_TIMEOUT_S
            ) as response:
                status = int(response.status)
        except urllib.error.HTTPError as exc:
            status = exc.code
        except (OSError, ValueError) as exc:
            return f"GET {self.url}/-/ready: {type(exc).__name__}: {exc}"
        return None if status == 200 else f"GET {self.url}/-/ready: HTTP {status}"
