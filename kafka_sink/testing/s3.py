"""A real S3-compatible server on 127.0.0.1 for tests: S3Proxy from Maven Central.

``LocalS3()`` runs the S3Proxy jar that ``make setup`` fetches (``$S3PROXY_JAR``, else
``<repo>/.cache/s3proxy/s3proxy-*-jar-with-dependencies.jar``) with its filesystem backend:
a bucket is a directory under :attr:`LocalS3.basedir` and an object is a file under it, so a test
can read what a client stored without going through S3 at all (an independent check).
Requests must be signed (AWS signature v2 or v4) with :attr:`access_key` and a secret made up for
each server; :meth:`env` gives the ``AWS_*`` variables an SDK-based client needs.

Invariants:
- The port comes from the OS (127.0.0.1:0); a lost bind race is retried once with a new port.
- Ready means the JVM logged Jetty's ``Started Server`` and accepts a TCP connection; failing
  that within ``startup_timeout_s`` (or the JVM exiting) raises :class:`S3StartError` with the
  tail of its log.
- ``close()`` (also on context exit) stops the JVM (SIGTERM, SIGKILL after a bounded wait) and
  removes the temporary directory; if the test process is killed outright the kernel kills the
  JVM (parent-death signal, Linux). Starting, waiting and stopping:
  :class:`kafka_sink.testing.jvm.JvmServer`.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from kafka_sink.testing.jvm import SMALL_SERVER_JVM_FLAGS, JvmServer, accepts, tail
from kafka_sink.testing.prerequisites import _checkout_roots, find_java

__all__ = ["LocalS3", "S3SetupError", "S3StartError", "find_s3proxy_jar"]

STARTED_MESSAGE = "Started Server"
# S3Proxy serves a handful of small objects in a test.
_JVM_FLAGS = ("-Xmx128m", *SMALL_SERVER_JVM_FLAGS)


class S3SetupError(RuntimeError):
    """The S3Proxy jar (or java) is missing: the message says how to get it."""


class S3StartError(RuntimeError):
    """S3Proxy did not become ready (or exited); the message carries its log tail."""


def find_s3proxy_jar(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The S3Proxy jar with its dependencies (``make setup`` fetches it)."""
    if explicit is not None:
        candidates = [Path(explicit)]
    elif os.environ.get("S3PROXY_JAR"):
        candidates = [Path(os.environ["S3PROXY_JAR"])]
    else:
        candidates = sorted(
            jar
            for root in _checkout_roots()
            for jar in (root / ".cache" / "s3proxy").glob("s3proxy-*-jar-with-dependencies.jar")
        )
    for jar in candidates:
        if jar.is_file():
            return jar.resolve()
    raise S3SetupError(
        "S3Proxy jar not found (s3proxy-*-jar-with-dependencies.jar in .cache/s3proxy, or "
        "$S3PROXY_JAR). Run `make setup` to fetch it from Maven Central."
    )


class _PortRaceError(S3StartError):
    """The port picked a moment earlier was taken before the JVM bound it."""


class LocalS3(JvmServer):
    """S3Proxy on 127.0.0.1 with a filesystem backend under a temporary directory."""

    region = "us-east-1"
    name = "S3Proxy"
    log_name = "s3proxy.log"
    workdir_prefix = "kafka-sink-s3-"
    start_error = S3StartError
    port_race_error = _PortRaceError

    def __init__(
        self,
        *,
        access_key: str = "pykafka-test",
        startup_timeout_s: float = 60.0,
        jar: str | os.PathLike[str] | None = None,
        java: str | None = None,
    ) -> None:
        super().__init__(startup_timeout_s=startup_timeout_s)
        self.access_key = access_key
        self.secret_key = secrets.token_hex(16)
        self._jar_arg = jar
        self._java_arg = java
        self._java = ""
        self._jar = Path()

    def __repr__(self) -> str:  # never the secret
        return f"LocalS3(endpoint={self.endpoint!r}, access_key={self.access_key!r})"

    # -- what tests use -----------------------------------------------------------------------
    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def basedir(self) -> Path:
        """The backend's root: ``basedir / bucket / key`` is the object's bytes."""
        return self.workdir / "data"

    def create_bucket(self, name: str) -> None:
        """Create bucket ``name`` through the S3 API; it appears as ``basedir / name``."""
        from pyarrow.fs import S3FileSystem

        S3FileSystem(
            access_key=self.access_key,
            secret_key=self.secret_key,
            region=self.region,
            endpoint_override=f"127.0.0.1:{self._port}",
            scheme="http",
            allow_bucket_creation=True,
        ).create_dir(name)

    def env(self, *, secret_key: str | None = None) -> dict[str, str]:
        """``AWS_*`` variables for an AWS SDK client of this server (``secret_key`` overrides).

        Checksums only when required: the SDK's default trailing checksums on uploads
        (``x-amz-trailer``) are not implemented by S3Proxy.
        """
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key if secret_key is None else secret_key,
            "AWS_REGION": self.region,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REQUEST_CHECKSUM_CALCULATION": "WHEN_REQUIRED",
            "AWS_RESPONSE_CHECKSUM_VALIDATION": "WHEN_REQUIRED",
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    # -- internals ----------------------------------------------------------------------------
    def _resolve(self) -> None:
        self._java = find_java(self._java_arg)
        self._jar = find_s3proxy_jar(self._jar_arg)

    def _command(self) -> list[str]:
        self.basedir.mkdir()
        conf = self.workdir / "s3proxy.conf"
        conf.write_text(
            "\n".join(
                [
                    f"s3proxy.endpoint={self.endpoint}",
                    "s3proxy.authorization=aws-v2-or-v4",
                    f"s3proxy.identity={self.access_key}",
                    f"s3proxy.credential={self.secret_key}",
                    "jclouds.provider=filesystem",
                    f"jclouds.filesystem.basedir={self.basedir}",
                    "",
                ]
            ),
            encoding="utf-8",
        )
        conf.chmod(0o600)
        return [self._java, *_JVM_FLAGS, "-jar", str(self._jar), "--properties", str(conf)]

    def _ready_problem(self, log: Path) -> str | None:
        if STARTED_MESSAGE not in tail(log):
            return f"no {STARTED_MESSAGE!r} in its log"
        if not accepts(self._port):
            return f"no connection accepted on {self.endpoint}"
        return None
