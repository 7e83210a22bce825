"""Where commit files are stored: a local directory, or a directory in S3, GCS, Azure or HDFS.

Role: map a commit-log location (a path, a ``file:`` URI, or a store URI such as
``s3a://bucket/ck/pykafka-commits``) to a :class:`CommitStore` that can check the location is
writable (``probe``) and write one commit file into it (``write``). Remote stores go through
``pyarrow.fs``, which the sink depends on already:

- ``s3``/``s3a``/``s3n``: ``S3FileSystem``. Credentials come from the AWS SDK's usual chain
  (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``, ``~/.aws``, instance
  or web-identity roles); the region from ``AWS_REGION``/``AWS_DEFAULT_REGION``, else looked up
  for the bucket; an S3-compatible server from ``AWS_ENDPOINT_URL_S3``/``AWS_ENDPOINT_URL``
  (which pyarrow does not read by itself), addressed path-style.
- ``gs``/``gcs``: ``GcsFileSystem`` with Google's application default credentials.
- ``abfs``/``abfss``/``wasb``/``wasbs`` (``container@account.<dfs|blob>.core.windows.net``):
  ``AzureFileSystem``; ``AZURE_STORAGE_KEY`` or ``AZURE_STORAGE_SAS_TOKEN`` when set, else the
  Azure SDK's default credential chain (``AZURE_CLIENT_ID``/``AZURE_TENANT_ID``/
  ``AZURE_CLIENT_SECRET``, managed identity).
- ``hdfs``: ``HadoopFileSystem`` (needs libhdfs and a JVM in the driver's Python process).

Invariants:
- A location whose scheme is none of the above raises :class:`CommitStoreUnavailableError`, and so
  does a known scheme whose client cannot be built here (pyarrow without that filesystem,
  libhdfs not loadable); the caller decides between refusing and warning.
- A commit file appears whole or not at all: locally and on HDFS it is written under a
  temporary name and renamed; in an object store it is one object written in one upload, which
  becomes visible only when complete. An existing file of the same name is kept as
  ``<name>.replaced-<ms>`` first.
- Messages never contain credentials: user-info passwords are cut from displayed URIs (in one
  pass over the text, whatever its length), and the values of the credential variables above
  are masked in every store error.
- ``names`` lists the files directly in the directory (what ``python -m kafka_sink report``
  reads); a missing directory has none.
- ``read`` tells a missing file (None) from one that cannot be read (:class:`CommitStoreError`),
  and never returns, nor reads whole, a file over :data:`MAX_COMMIT_FILE_BYTES`: that is a
  :class:`CommitStoreError` naming the file and the cap.
- A location ``urlparse`` cannot read (an unclosed ``[`` host) is a :class:`CommitStoreError`
  naming it, wherever it is parsed; no ``ValueError`` leaves this module.
- Messages quote a location through :func:`shown_location` (its first 200 characters, then its
  length) and a store's error by its first line, capped; an OS error's file name is shown the
  same way, so no message grows with the location.
- Nothing here is pickled; a store is built where it is used (on the driver) and dropped.
"""

from __future__ import annotations

import errno
import os
import string
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol
from urllib.parse import ParseResult, urlparse

from kafka_sink.sink_errors import CommitStoreError, CommitStoreUnavailableError

__all__ = [
    "LOCAL_SCHEMES",
    "MAX_COMMIT_FILE_BYTES",
    "STORE_SCHEMES",
    "CommitStore",
    "CommitStoreError",
    "CommitStoreUnavailableError",
    "as_local_path",
    "display_location",
    "join",
    "open_store",
    "redact",
    "shown_location",
    "store_hint",
]

LOCAL_SCHEMES = frozenset({"", "file"})
_S3 = frozenset({"s3", "s3a", "s3n"})
_GCS = frozenset({"gs", "gcs"})
_AZURE = frozenset({"abfs", "abfss", "wasb", "wasbs"})
_HDFS = frozenset({"hdfs"})
#: Remote schemes the commit log can be written to (when pyarrow can build their client).
STORE_SCHEMES = _S3 | _GCS | _AZURE | _HDFS

# Environment variables whose values are credentials: masked in every message.
_SECRET_VARS = (
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_STORAGE_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_CLIENT_SECRET",
)
# S3 connections fail fast instead of hanging on an unreachable endpoint.
_CONNECT_TIMEOUT_S = 10.0
# An S3 request (after connecting) that takes longer fails instead of holding the commit.
_REQUEST_TIMEOUT_S = 30.0
# The characters of a URI scheme after its first letter (RFC 3986).
_SCHEME_CHARS = frozenset(string.ascii_letters + string.digits + "+.-")
#: The largest commit file ``read`` returns: a commit document is a few KiB (one line per
#: partition's metrics); a bigger file is no commit document and is refused before it is read
#: whole into memory.
MAX_COMMIT_FILE_BYTES = 16 * 1024 * 1024
# How much of a location a message shows (then its length): paths can be any length.
_SHOWN_LOCATION_CHARS = 200
# The first line of a store's error, at most this long (a store may quote a long path or key).
_REASON_CHARS = 500
# GCS retries failed requests for up to 15 minutes by default; a commit should fail sooner.
_GCS_RETRY_LIMIT = timedelta(seconds=60)


class CommitStore(Protocol):
    """A directory that receives commit files."""

    @property
    def location(self) -> str:
        """The directory as users know it (an absolute path or a URI without credentials)."""

    def probe(self) -> None:
        """Create the directory; write and remove a uniquely named probe file (or raise)."""

    def write(self, name: str, data: bytes) -> str:
        """Write ``data`` as ``<location>/<name>`` whole; returns where it went."""

    def read(self, name: str) -> bytes | None:
        """The bytes of ``<location>/<name>``; None when there is no such file."""

    def names(self) -> list[str]:
        """The names of the files directly in the directory, sorted; [] when it is missing."""


def _parsed(location: str) -> ParseResult:
    """``urlparse(location)``; a location it cannot parse is a :class:`CommitStoreError` naming
    it (capped), never urllib's bare ``ValueError``."""
    try:
        return urlparse(location)
    except ValueError:  # an unclosed '[' host, or a host that NFKC normalization changes
        raise CommitStoreError(
            f"{shown_location(location)} is not a valid path or URI (an unclosed '[' in its host, "
            "or a host that Unicode normalization changes). Fix: give a local directory, or a "
            "URI such as s3a://bucket/dir or hdfs://namenode:8020/dir"
        ) from None


def as_local_path(location: str) -> str | None:
    """A local filesystem path for ``location`` (plain path or ``file:`` URI), else None.

    A location that does not parse raises :class:`CommitStoreError`.
    """
    parsed = _parsed(location)
    if parsed.scheme == "":
        return os.path.abspath(location)
    if parsed.scheme == "file":
        return os.path.abspath(parsed.path)
    # A Windows drive letter parses as a one-letter scheme; no store scheme is that short.
    if len(parsed.scheme) == 1:
        return os.path.abspath(location)
    return None


def scheme_of(location: str) -> str:
    return _parsed(location).scheme.lower()


def join(location: str, name: str) -> str:
    """``location/name`` for a path or a URI (a URI keeps its query-free form)."""
    local = as_local_path(location)
    if local is not None:
        return os.path.join(local, name)
    return location.rstrip("/") + "/" + name


def display_location(location: str) -> str:
    """``location`` without a password in its user-info (``s3a://key:secret@bucket/...``).

    Done on the text, not on ``urlparse``: a secret may hold ``/``, which ends a parsed netloc,
    and ``@``; everything from the ``:`` after the first ``scheme://user`` up to the location's
    last ``@`` is masked (a path holding ``@`` after a ``host:port`` is masked too: shown less,
    never a secret). One pass over the text, whatever its length (a pattern searched at every
    position took 35 s on a 100,000-character path).
    """
    last_at = location.rfind("@")
    found = location.find("://", 0, max(last_at, 0))
    while found != -1:
        start = found
        while start > 0 and location[start - 1] in _SCHEME_CHARS:
            start -= 1
        while start < found and location[start] not in string.ascii_letters:
            start += 1  # a scheme starts with a letter
        end = found + 3
        while end < last_at and location[end] not in ":/@":
            end += 1  # the user name
        if start < found and end < last_at and location[end] == ":":
            return f"{location[:end]}:***{location[last_at:]}"
        found = location.find("://", end, last_at)
    return location


def shown_location(location: str) -> str:
    """A location as a message shows it: no password, and capped (paths can be any length)."""
    shown = display_location(location)
    if len(shown) <= _SHOWN_LOCATION_CHARS:
        return shown
    return f"{shown[:_SHOWN_LOCATION_CHARS]}…({len(shown)} characters)"


def _netloc(location: str) -> str:
    return _parsed(location).netloc


def redact(text: str) -> str:
    """``text`` with the value of every credential variable in the environment masked."""
    for var in _SECRET_VARS:
        value = os.environ.get(var)
        if value and len(value) >= 4:
            text = text.replace(value, f"<{var}>")
    return text


def store_hint(location: str) -> str:
    """Where the driver's credentials for ``location`` come from, for error messages."""
    scheme = scheme_of(location)
    if scheme in _S3:
        return (
            "the driver's AWS credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, ~/.aws or an "
            "instance role; AWS_REGION; AWS_ENDPOINT_URL for an S3-compatible server) must allow "
            "writing there, and the bucket must exist"
        )
    if scheme in _GCS:
        return (
            "the driver's Google application default credentials (GOOGLE_APPLICATION_CREDENTIALS) "
            "must allow writing there, and the bucket must exist"
        )
    if scheme in _AZURE:
        return (
            "the driver's Azure credentials (AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN or "
            "AZURE_CLIENT_ID/AZURE_TENANT_ID/AZURE_CLIENT_SECRET) must allow writing there, and "
            "the container must exist"
        )
    if scheme in _HDFS:
        return "the driver's HDFS user must be allowed to write there"
    return "the driver must be able to write there"


def open_store(location: str) -> CommitStore:
    """The store for ``location``; :class:`CommitStoreUnavailableError` when there is none."""
    local = as_local_path(location)
    if local is not None:
        return LocalCommitStore(local)
    scheme = scheme_of(location)
    builder = _BUILDERS.get(scheme)
    if builder is None:
        raise CommitStoreUnavailableError(
            f"the scheme '{scheme}' is not one the commit log can be written to (local paths, "
            "file:, s3/s3a/s3n, gs/gcs, abfs/abfss/wasb/wasbs, hdfs)"
        )
    if scheme not in _AZURE and (
        display_location(location) != location or "@" in _netloc(location)
    ):
        raise CommitStoreError(
            "credentials in the URI are refused (they would end up in logs); give them through "
            "the store's environment and drop them from the URI"
        )
    try:
        fs, root = builder(_parsed(location))
    except CommitStoreError:
        raise
    except (OSError, ValueError) as exc:  # pyarrow refused the settings (ArrowInvalid)
        raise CommitStoreError(_reason(exc)) from None
    return ArrowCommitStore(
        location=display_location(location).rstrip("/"),
        fs=fs,
        root=root.rstrip("/"),
        rename_into_place=scheme in _HDFS,
    )


# -- local ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LocalCommitStore:
    """A directory on the driver's own filesystem."""

    location: str

    def probe(self) -> None:
        _make_dirs(self.location)
        fd, probe = tempfile.mkstemp(prefix=".pykafka-probe-", suffix=".tmp", dir=self.location)
        try:
            os.write(fd, b"probe\n")
        finally:
            os.close(fd)
            os.unlink(probe)

    def write(self, name: str, data: bytes) -> str:
        _make_dirs(self.location)
        path = os.path.join(self.location, name)
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=self.location)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            if os.path.exists(path):
                os.replace(path, f"{path}.replaced-{int(time.time() * 1000)}")
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return path

    def read(self, name: str) -> bytes | None:
        path = os.path.join(self.location, name)
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_COMMIT_FILE_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CommitStoreError(_reason(exc)) from None
        if len(data) > MAX_COMMIT_FILE_BYTES:
            raise _too_large(path)
        return data

    def names(self) -> list[str]:
        try:
            return sorted(
                e.name for e in os.scandir(self.location) if e.is_file(follow_symlinks=False)
            )
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise CommitStoreError(_reason(exc)) from None


def _make_dirs(path: str) -> None:
    """``os.makedirs(path, exist_ok=True)`` without recursion: a path deeper than Python's
    recursion limit gets the directories it can or the OS's error, never a RecursionError."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise FileExistsError(errno.EEXIST, "exists and is not a directory", path)
    missing: list[str] = []
    while not os.path.exists(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory)
        except FileExistsError:
            if not os.path.isdir(directory):
                raise


# -- pyarrow.fs stores ----------------------------------------------------------------------


@dataclass(frozen=True)
class ArrowCommitStore:
    """A directory in a ``pyarrow.fs`` filesystem; ``root`` is its path there."""

    location: str
    fs: Any
    root: str
    #: Write under a temporary name and rename (HDFS, where a rename is atomic and an open file
    #: is visible while written); object stores publish a whole object on completion instead.
    rename_into_place: bool

    def probe(self) -> None:
        self._call(self._probe)

    def write(self, name: str, data: bytes) -> str:
        self._call(lambda: self._write(name, data))
        return f"{self.location}/{name}"

    def read(self, name: str) -> bytes | None:
        found: list[bytes | None] = []
        self._call(lambda: found.append(self._read(name)))
        return found[0]

    def names(self) -> list[str]:
        found: list[list[str]] = []
        self._call(lambda: found.append(self._names()))
        return found[0]

    def _names(self) -> list[str]:
        from pyarrow.fs import FileSelector, FileType

        if self.fs.get_file_info(self.root).type == FileType.NotFound:
            return []
        infos = self.fs.get_file_info(FileSelector(self.root, allow_not_found=True))
        return sorted(i.base_name for i in infos if i.type == FileType.File)

    def _read(self, name: str) -> bytes | None:
        from pyarrow.fs import FileType

        path = f"{self.root}/{name}"
        info = self.fs.get_file_info(path)
        if info.type != FileType.File:
            return None
        if info.size is not None and info.size > MAX_COMMIT_FILE_BYTES:
            raise _too_large(f"{self.location}/{name}")
        with self.fs.open_input_stream(path) as stream:
            data: bytes = stream.read(MAX_COMMIT_FILE_BYTES + 1)  # it may have grown since
        if len(data) > MAX_COMMIT_FILE_BYTES:
            raise _too_large(f"{self.location}/{name}")
        return data

    def _probe(self) -> None:
        from pyarrow.fs import FileType

        if self.fs.get_file_info(self.root).type == FileType.File:
            raise CommitStoreError("it exists and is not a directory")
        self.fs.create_dir(self.root, recursive=True)
        probe = f"{self.root}/.pykafka-probe-{uuid.uuid4().hex}.tmp"
        with self.fs.open_output_stream(probe) as out:
            out.write(b"probe\n")
        self.fs.delete_file(probe)

    def _write(self, name: str, data: bytes) -> None:
        from pyarrow.fs import FileType

        path = f"{self.root}/{name}"
        if self.fs.get_file_info(path).type == FileType.File:
            self.fs.move(path, f"{path}.replaced-{int(time.time() * 1000)}")
        target = path
        if self.rename_into_place:
            self.fs.create_dir(self.root, recursive=True)
            target = f"{self.root}/.{name}.{uuid.uuid4().hex[:8]}.tmp"
        with self.fs.open_output_stream(target) as out:
            out.write(data)
        if target != path:
            self.fs.move(target, path)

    @staticmethod
    def _call(action: Callable[[], None]) -> None:
        try:
            action()
        except CommitStoreError:
            raise
        except OSError as exc:
            raise CommitStoreError(_reason(exc)) from None


def _too_large(where: str) -> CommitStoreError:
    return CommitStoreError(
        f"{shown_location(where)} is larger than {MAX_COMMIT_FILE_BYTES} bytes "
        f"({MAX_COMMIT_FILE_BYTES // (1024 * 1024)} MiB), more than a commit document can hold"
    )


def _reason(exc: BaseException) -> str:
    """The first line of a store error, credentials masked (AWS errors run to many lines), and
    capped: an OS error's file name is shown as :func:`shown_location` shows a location."""
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        text = f"{exc.strerror}: {shown_location(os.fsdecode(exc.filename))}"
    else:
        lines = str(exc).strip().splitlines()
        text = lines[0] if lines else type(exc).__name__
    # pyarrow's advice about its own option does not apply: the sink never creates buckets.
    text = text.replace(" To create buckets, enable the allow_bucket_creation option.", "")
    text = redact(text)
    return text if len(text) <= _REASON_CHARS else f"{text[:_REASON_CHARS]}…"


def _s3(parsed: Any) -> tuple[Any, str]:
    try:
        from pyarrow.fs import S3FileSystem, resolve_s3_region
    except ImportError as exc:
        raise CommitStoreUnavailableError(f"this pyarrow has no S3 support ({exc})") from None
    bucket = parsed.hostname
    if not bucket:
        raise CommitStoreError("the URI names no bucket (s3a://<bucket>/<path>)")
    kwargs: dict[str, Any] = {
        "connect_timeout": _CONNECT_TIMEOUT_S,
        "request_timeout": _REQUEST_TIMEOUT_S,
    }
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        url = urlparse(endpoint if "://" in endpoint else f"https://{endpoint}")
        kwargs["endpoint_override"] = url.netloc
        kwargs["scheme"] = url.scheme or "https"
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if not region and not endpoint:
        try:
            region = resolve_s3_region(bucket)
        except OSError as exc:
            reason = f"cannot find the region of bucket '{bucket}': {_reason(exc)}"
            raise CommitStoreError(reason) from None
    if region:
        kwargs["region"] = region
    fs = S3FileSystem(**kwargs)
    return fs, f"{bucket}{parsed.path}"


def _gcs(parsed: Any) -> tuple[Any, str]:
    try:
        from pyarrow.fs import GcsFileSystem
    except ImportError as exc:
        raise CommitStoreUnavailableError(f"this pyarrow has no GCS support ({exc})") from None
    bucket = parsed.hostname
    if not bucket:
        raise CommitStoreError("the URI names no bucket (gs://<bucket>/<path>)")
    return GcsFileSystem(retry_time_limit=_GCS_RETRY_LIMIT), f"{bucket}{parsed.path}"


def _azure(parsed: Any) -> tuple[Any, str]:
    try:
        from pyarrow.fs import AzureFileSystem
    except ImportError as exc:
        raise CommitStoreUnavailableError(f"this pyarrow has no Azure support ({exc})") from None
    container, host = parsed.username, parsed.hostname or ""
    if not container or "." not in host:
        raise CommitStoreError(
            "the URI names no container and account "
            "(abfss://<container>@<account>.dfs.core.windows.net/<path>)"
        )
    kwargs: dict[str, Any] = {}
    if os.environ.get("AZURE_STORAGE_KEY"):
        kwargs["account_key"] = os.environ["AZURE_STORAGE_KEY"]
    elif os.environ.get("AZURE_STORAGE_SAS_TOKEN"):
        kwargs["sas_token"] = os.environ["AZURE_STORAGE_SAS_TOKEN"]
    try:
        fs = AzureFileSystem(host.split(".", 1)[0], **kwargs)
    except (OSError, ValueError) as exc:
        raise CommitStoreError(_reason(exc)) from None
    return fs, f"{container}{parsed.path}"


def _hdfs(parsed: Any) -> tuple[Any, str]:
    from pyarrow.fs import HadoopFileSystem

    host = parsed.hostname or "default"  # hdfs:///path: the cluster's fs.defaultFS
    try:
        fs = HadoopFileSystem(host, parsed.port or (0 if host == "default" else 8020))
    except OSError as exc:
        reason = _reason(exc)
        if "load libjvm" in reason or "load libhdfs" in reason:  # no client in this process
            raise CommitStoreUnavailableError(
                f"the HDFS client cannot run in the driver's Python process ({reason}; it needs "
                "JAVA_HOME, HADOOP_HOME or ARROW_LIBHDFS_DIR, and the Hadoop CLASSPATH)"
            ) from None
        raise CommitStoreError(reason) from None
    return fs, parsed.path or "/"


_BUILDERS: dict[str, Callable[[Any], tuple[Any, str]]] = {
    **dict.fromkeys(_S3, _s3),
    **dict.fromkeys(_GCS, _gcs),
    **dict.fromkeys(_AZURE, _azure),
    **dict.fromkeys(_HDFS, _hdfs),
}
