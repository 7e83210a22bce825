"""Commit-log locations: which store a URI maps to, and what happens when there is none.

No network here: building a pyarrow filesystem does not connect (the S3 region is given), and
the real round trips against an S3 server are in ``tests/spark/test_spark_commit_s3.py``.
"""

from __future__ import annotations

import logging
import os

import pytest
from pyarrow import fs as pafs

from kafka_sink.sink_errors import CommitStoreError, CommitStoreUnavailableError, SinkOptionError
from kafka_sink.spark import logs
from kafka_sink.spark.commit_log.store import (
    ArrowCommitStore,
    LocalCommitStore,
    display_location,
    open_store,
    redact,
)
from kafka_sink.spark.options import SinkOptions
from kafka_sink.spark.schema import InputLayout
from kafka_sink.spark.writer import PyKafkaStreamWriter

BASE = {"kafka.bootstrap.servers": "localhost:9092"}


def _hdfs_client_missing() -> bool:
    try:
        pafs.HadoopFileSystem("default", 0)
    except OSError as exc:
        return str(exc).startswith("Unable to load")
    return False


needs_no_libhdfs = pytest.mark.skipif(
    not _hdfs_client_missing(), reason="libhdfs loads here: the no-client path cannot be shown"
)


def _kwargs(store: ArrowCommitStore) -> dict[str, object]:
    return dict(store.fs.__reduce__()[1][0])


@pytest.fixture
def aws_env(monkeypatch):
    for var in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return monkeypatch


@pytest.mark.parametrize("scheme", ["s3", "s3a", "s3n"])
def test_s3_uris_map_to_s3_bucket_and_key(aws_env, scheme) -> None:
    store = open_store(f"{scheme}://bkt/ck/pykafka-commits/")
    assert isinstance(store, ArrowCommitStore) and isinstance(store.fs, pafs.S3FileSystem)
    assert store.root == "bkt/ck/pykafka-commits"
    assert store.location == f"{scheme}://bkt/ck/pykafka-commits"
    kwargs = _kwargs(store)
    assert kwargs["region"] == "eu-west-3"
    assert kwargs["endpoint_override"] == ""  # AWS itself
    assert not store.rename_into_place  # one PUT publishes the whole object


def test_s3_endpoint_comes_from_the_aws_endpoint_variables(aws_env) -> None:
    aws_env.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    kwargs = _kwargs(open_store("s3a://bkt/x"))  # type: ignore[arg-type]
    assert (kwargs["endpoint_override"], kwargs["scheme"]) == ("127.0.0.1:9000", "http")
    aws_env.setenv("AWS_ENDPOINT_URL_S3", "https://s3.example.net:8443")  # the S3-only one wins
    kwargs = _kwargs(open_store("s3a://bkt/x"))  # type: ignore[arg-type]
    assert (kwargs["endpoint_override"], kwargs["scheme"]) == ("s3.example.net:8443", "https")


def test_gcs_and_azure_uris_map_to_their_filesystems(monkeypatch) -> None:
    monkeypatch.delenv("AZURE_STORAGE_KEY", raising=False)
    monkeypatch.delenv("AZURE_STORAGE_SAS_TOKEN", raising=False)
    gcs = open_store("gs://bkt/a/b")
    assert isinstance(gcs, ArrowCommitStore) and isinstance(gcs.fs, pafs.GcsFileSystem)
    assert gcs.root == "bkt/a/b"
    azure = open_store("abfss://cont@acct.dfs.core.windows.net/a/b")
    assert isinstance(azure, ArrowCommitStore) and isinstance(azure.fs, pafs.AzureFileSystem)
    assert azure.root == "cont/a/b"
    assert _kwargs(azure)["account_name"] == "acct"
    with pytest.raises(CommitStoreError, match="no container and account"):
        open_store("abfss://acct.dfs.core.windows.net/a")


def test_local_paths_and_file_uris_stay_local(tmp_path) -> None:
    assert open_store(str(tmp_path)) == LocalCommitStore(str(tmp_path))
    assert open_store(f"file:{tmp_path}") == LocalCommitStore(str(tmp_path))


def test_unknown_scheme_has_no_store() -> None:
    with pytest.raises(CommitStoreUnavailableError, match="scheme 'oss' is not one"):
        open_store("oss://bucket/x")


@needs_no_libhdfs
def test_hdfs_without_libhdfs_has_no_store() -> None:
    with pytest.raises(CommitStoreUnavailableError) as info:
        open_store("hdfs://namenode:8020/ck")
    message = str(info.value)
    assert "HDFS client cannot run" in message and "load lib" in message
    assert "\n" not in message  # one line, not pyarrow's list of every path it tried


def test_credentials_never_shown(monkeypatch) -> None:
    assert display_location("s3a://AKIDX:s3cr3t/x@bkt/p") == "s3a://AKIDX:***@bkt/p"
    assert display_location("s3a://bkt/p") == "s3a://bkt/p"
    with pytest.raises(CommitStoreError, match="credentials in the URI are refused") as info:
        open_store("s3a://AKIDX:s3cr3t/x@bkt/p")
    assert "s3cr3t" not in str(info.value)
    opts = SinkOptions.from_options({**BASE, "commitlog": "s3a://AKIDX:s3cr3t/x@bkt/p"})
    assert "s3cr3t" not in repr(opts)
    with pytest.raises(SinkOptionError) as refused:
        opts.check_commit_dir(streaming=False)
    assert "credentials in the URI are refused" in str(refused.value)
    assert "s3cr3t" not in str(refused.value)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI")
    assert redact("denied for wJalrXUtnFEMI") == "denied for <AWS_SECRET_ACCESS_KEY>"


@needs_no_libhdfs
def test_commit_log_in_hdfs_without_a_client_is_refused() -> None:
    opts = SinkOptions.from_options({**BASE, "commitlog": "hdfs://nn:8020/commits"})
    with pytest.raises(SinkOptionError) as info:
        opts.check_commit_dir(streaming=False)
    message = str(info.value)
    assert "option 'commitLog'" in message and "hdfs://nn:8020/commits" in message
    assert "HDFS client cannot run" in message and "'none'" in message


def test_checkpoint_in_an_unsupported_store_warns_once_and_writes_nothing(
    tmp_path, monkeypatch, caplog
) -> None:
    local_dir = tmp_path / "spark-local"
    local_dir.mkdir()
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(local_dir))
    monkeypatch.setattr(logs, "_WARNED", set())
    checkpoint = f"oss://bucket/{tmp_path.name}/ck"
    opts = SinkOptions.from_options({**BASE, "topic": "t", "checkpointlocation": checkpoint})
    with caplog.at_level(logging.WARNING, logger="kafka_sink.spark"):
        assert opts.check_commit_dir(streaming=True) is None  # planning micro-batch 0
        assert opts.check_commit_dir(streaming=True) is None  # committing it, same process
        monkeypatch.setattr(logs, "_WARNED", set())  # as in Spark's other worker
        assert opts.check_commit_dir(streaming=True) is None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    text = warnings[0].getMessage()
    assert f"no commit files will be written for checkpoint {checkpoint}" in text
    assert "scheme 'oss'" in text and "'commitLog'" in text
    assert len(os.listdir(local_dir)) == 1  # the marker the other workers see


@needs_no_libhdfs
def test_checkpoint_in_hdfs_without_a_client_commits_without_a_file(
    tmp_path, monkeypatch, caplog
) -> None:
    monkeypatch.delenv("SPARK_LOCAL_DIRS", raising=False)
    monkeypatch.setattr(logs, "_WARNED", set())
    opts = SinkOptions.from_options(
        {**BASE, "topic": "t", "checkpointlocation": f"hdfs://nn:8020/{tmp_path.name}"}
    )
    layout = InputLayout(False, False, False, False, None)
    with caplog.at_level(logging.INFO, logger="kafka_sink.spark"):
        assert opts.check_commit_dir(streaming=True) is None
        writer = PyKafkaStreamWriter(opts, layout, streaming=True, overwrite=False, write_id="s")
        writer.commit([], 0)
    levels = [(r.levelno, r.getMessage()) for r in caplog.records]
    warnings = [m for lvl, m in levels if lvl == logging.WARNING]
    assert len(warnings) == 1 and "HDFS client cannot run" in warnings[0]
    commit_lines = [m for lvl, m in levels if lvl == logging.INFO]
    assert len(commit_lines) == 1 and "; log " not in commit_lines[0]  # logged, no file
