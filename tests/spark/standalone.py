"""A Spark standalone cluster on loopback addresses and a packed virtualenv to ship, for the tests.

- The master listens on 127.0.0.1 and worker i on 127.0.0.(i+1): distinct hosts to Spark.
- ``StandaloneCluster``: one master and N workers started with pyspark's own launcher
  (``$SPARK_HOME/bin/spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker``),
  each in its own process group (``close()`` ends a worker's executors and their Python workers
  with it). Ports are chosen by the JVMs (port 0) and read back from their logs; the master's REST
  submission server (a fixed port, 6066) is off. ``start()`` returns when the master's
  ``/json/`` page counts every worker alive, and raises with the log tails otherwise: every wait
  is bounded.
- Workers, and so executors, run with a minimal environment (no PYTHONPATH, PYSPARK_*,
  VIRTUAL_ENV, and a PATH holding only Java and the system directories): whatever Python code an
  executor imports comes from what the application ships.
- ``build_environment``: a virtualenv made with ``venv --copies`` (no symlink to the system
  Python, which Spark's unpacker would not keep), holding this package (a regular install from a
  copy of the source, not the editable one) and its dependencies at the versions the tests run
  with, minus pyspark (Spark puts its own Python side on the executors' path). It is built and
  packed as the README says: a ``.tar.gz`` (Spark unpacks ``.tar`` without file modes, so
  ``bin/python`` would not run) with relative names and without the ``lib64`` link.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pyspark

ROOT = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).resolve().parent
DAEMON_MEMORY = "256m"
START_TIMEOUT_S = 180.0

_MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")
_MASTER_UI = re.compile(
    r"MasterWebUI: Bound MasterWebUI to \S+, and started at http://[^:/]+:(\d+)"
)
_REGISTERED = "Successfully registered with master"


class ClusterStartError(RuntimeError):
    pass


def daemon_env(conf_dir: Path, host: str = "127.0.0.1") -> dict[str, str]:
    """The environment of the master and workers: Java, Spark, nothing from the test's Python."""
    java = shutil.which("java")
    path = [str(Path(java).resolve().parent)] if java else []
    path += ["/usr/local/bin", "/usr/bin", "/bin"]
    env = {
        "PATH": os.pathsep.join(path),
        "HOME": os.environ.get("HOME", "/tmp"),
        "LANG": "C.UTF-8",
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_CONF_DIR": str(conf_dir),
        "SPARK_LOCAL_IP": host,
        "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
    }
    if "JAVA_HOME" in os.environ:
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    return env


@dataclass
class _Daemon:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return "(no log)"
        # Stack frames say little here; the lines around them say what failed.
        kept = [line for line in text if not line.lstrip().startswith("at ")]
        return "\n".join(kept[-lines:])


class StandaloneCluster:
    """A master and ``workers`` workers (``cores`` cores, ``memory`` each) under ``workdir``."""

    def __init__(self, workdir: Path, *, workers: int = 2, cores: int = 1, memory: str = "1g"):
        self.workdir = workdir
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.url = ""
        self.ui_port = 0
        self._daemons: list[_Daemon] = []
        self._conf_dir = workdir / "conf"
        self._logs = workdir / "logs"

    def start(self, timeout_s: float = START_TIMEOUT_S) -> StandaloneCluster:
        deadline = time.monotonic() + timeout_s
        self._conf_dir.mkdir(parents=True, exist_ok=True)
        self._logs.mkdir(parents=True, exist_ok=True)
        props = self._conf_dir / "daemons.conf"
        props.write_text("spark.master.rest.enabled false\nspark.ui.showConsoleProgress false\n")
        try:
            master = self._spawn(
                "master",
                "org.apache.spark.deploy.master.Master",
                ["--host", "127.0.0.1", "--port", "0", "--webui-port", "0"],
                props,
            )
            self.url = self._wait_for(master, _MASTER_URL, deadline)
            self.ui_port = int(self._wait_for(master, _MASTER_UI, deadline))
            for i in range(self.workers):
                work = self.workdir / f"worker-{i}"
                work.mkdir(exist_ok=True)
                # Each worker on its own loopback address, so that Spark sees distinct hosts (it
                # never runs a speculative copy of a task on a host already running it).
                host = f"127.0.0.{i + 1}"
                self._spawn(
                    f"worker-{i}",
                    "org.apache.spark.deploy.worker.Worker",
                    [
                        self.url,
                        "--host",
                        host,
                        "--port",
                        "0",
                        "--webui-port",
                        "0",
                        "--cores",
                        str(self.cores),
                        "--memory",
                        self.memory,
                        "--work-dir",
                        str(work),
                    ],
                    props,
                    host,
                )
            self._wait_for_workers(deadline)
        except BaseException:
            self.close()
            raise
        return self

    def _spawn(
        self, name: str, cls: str, args: list[str], props: Path, host: str = "127.0.0.1"
    ) -> _Daemon:
        log = self._logs / f"{name}.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [
                    str(SPARK_HOME / "bin" / "spark-class"),
                    cls,
                    *args,
                    "--properties-file",
                    str(props),
                ],
                cwd=str(self.workdir),
                env=daemon_env(self._conf_dir, host),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        daemon = _Daemon(name, process, log)
        self._daemons.append(daemon)
        return daemon

    def _wait_for(self, daemon: _Daemon, pattern: re.Pattern[str], deadline: float) -> str:
        while True:
            text = daemon.log.read_text(encoding="utf-8", errors="replace")
            found = pattern.search(text)
            if found:
                return found.group(1)
            if daemon.process.poll() is not None:
                raise ClusterStartError(
                    f"Spark {daemon.name} exited (code {daemon.process.returncode}) before "
                    f"logging {pattern.pattern!r}; log {daemon.log}:\n{daemon.tail()}"
                )
            if time.monotonic() > deadline:
                raise ClusterStartError(
                    f"Spark {daemon.name} did not log {pattern.pattern!r} in time; "
                    f"log {daemon.log}:\n{daemon.tail()}"
                )
            time.sleep(0.2)

    def status(self) -> dict[str, object]:
        """The master's ``/json/`` page (workers, applications)."""
        url = f"http://127.0.0.1:{self.ui_port}/json/"
        with urllib.request.urlopen(url, timeout=5) as answer:
            result: dict[str, object] = json.load(answer)
            return result

    def _wait_for_workers(self, deadline: float) -> None:
        alive = 0
        while True:
            try:
                alive = int(self.status().get("aliveworkers", 0))  # type: ignore[call-overload]
            except OSError:
                alive = 0
            if alive >= self.workers:
                return
            for daemon in self._daemons:
                if daemon.process.poll() is not None:
                    raise ClusterStartError(
                        f"Spark {daemon.name} exited (code {daemon.process.returncode}) while "
                        f"the workers registered; log {daemon.log}:\n{daemon.tail()}"
                    )
            if time.monotonic() > deadline:
                tails = "\n".join(f"--- {d.name} ({d.log}):\n{d.tail(15)}" for d in self._daemons)
                raise ClusterStartError(
                    f"{alive} of {self.workers} Spark workers registered with {self.url} in "
                    f"time (master UI port {self.ui_port}):\n{tails}"
                )
            time.sleep(0.5)

    def logs(self, lines: int = 30) -> str:
        """The daemons' log tails and the executors' stderr tails, for failure messages."""
        parts = [f"--- {d.name} ({d.log}):\n{d.tail(lines)}" for d in self._daemons]
        for stderr in sorted(self.workdir.glob("worker-*/app-*/*/stderr")):
            text = stderr.read_text(encoding="utf-8", errors="replace").splitlines()
            kept = [line for line in text if not line.lstrip().startswith("at ")]
            parts.append(f"--- executor {stderr.parent}:\n" + "\n".join(kept[-lines:]))
        return "\n".join(parts)

    def close(self) -> None:
        # Workers first (their executors are in their process groups), then the master.
        for daemon in reversed(self._daemons):
            _stop_group(daemon.process)
        self._daemons.clear()

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _stop_group(process: subprocess.Popen[bytes], grace_s: float = 20.0) -> None:
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace_s)
    # Children (executors, Python workers) may outlive the JVM that started them.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=grace_s)


# --------------------------------------------------------------------------------------------
# The environment shipped to executors


@dataclass(frozen=True)
class ShippedEnvironment:
    directory: Path  # the virtualenv as built (what the archive unpacks to)
    archive: Path  # .tar.gz for --archives / spark.archives
    python_version: str


_PACKAGE = "pykafka-sink"


def pinned_requirements() -> list[str]:
    """This package's dependencies at the versions installed here, except pyspark."""
    pins = []
    for requirement in metadata.requires(_PACKAGE) or []:
        if "extra ==" in requirement:
            continue
        name = re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0]
        if name.lower() == "pyspark":
            continue
        pins.append(f"{name}=={metadata.version(name)}")
    return pins


def _run(cmd: list[str], what: str, timeout_s: float, cwd: Path | None = None) -> str:
    try:
        done = subprocess.run(
            cmd,
            cwd=str(cwd) if cwd else None,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"{what}: no result in {timeout_s:.0f} s ({' '.join(cmd)})") from exc
    if done.returncode != 0:
        raise RuntimeError(
            f"{what} failed (exit {done.returncode}): {' '.join(cmd)}\n"
            f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
        )
    return done.stdout


def build_environment(base: Path, python: str = sys.executable) -> ShippedEnvironment:
    """A packed virtualenv with this package and its dependencies, under ``base``."""
    env_dir = base / "environment"
    _run([python, "-m", "venv", "--copies", "--without-pip", str(env_dir)], "venv", 300)
    env_python = env_dir / "bin" / "python"
    # Install from a copy: building in the source tree would leave build/ behind in it.
    source = base / "source"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("kafka_sink", "pyspark_pykafka"):
        shutil.copytree(ROOT / name, source / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    pip = [python, "-m", "pip", "--python", str(env_python), "install", "--quiet"]
    _run([*pip, *pinned_requirements()], "pip install (dependencies)", 900)
    _run([*pip, "--no-deps", str(source)], "pip install (this package)", 600)
    version = _run(
        [str(env_python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        "the environment's python",
        60,
    ).strip()
    archive = base / "pykafka-env.tar.gz"
    pack(env_dir, archive)
    return ShippedEnvironment(env_dir, archive, version)


def pack(directory: Path, archive: Path) -> None:
    """``directory`` as a .tar.gz, with the README's command: relative names, no lib64 link."""
    names = sorted(p.name for p in directory.iterdir() if p.name in ("bin", "lib", "pyvenv.cfg"))
    _run(
        ["tar", "-czf", str(archive), "-C", str(directory), "--exclude=__pycache__", *names],
        "tar",
        600,
    )
