"""SinkOptions: what format("pykafka") accepts, refuses, and hands the producer."""

from __future__ import annotations

import pickle

import pytest

from kafka_sink.errors import ConfigError
from kafka_sink.sink_errors import SinkOptionError
from kafka_sink.spark.options import SinkOptions

BASE = {"kafka.bootstrap.servers": "localhost:9092"}


def test_kafka_prefix_is_stripped_and_keys_lowercased() -> None:
    opts = SinkOptions.from_options(
        {"Kafka.Bootstrap.Servers": "h:1", "kafka.LINGER.MS": "7", "topic": " t1 "}
    )
    assert opts.producer_config == {
        "bootstrap.servers": "h:1",
        "linger.ms": "7",
        "batch.size": "262144",  # the sink's default
    }
    assert opts.topic == "t1"


def test_user_batch_size_wins_over_the_sink_default() -> None:
    opts = SinkOptions.from_options({**BASE, "kafka.batch.size": "16384"})
    assert opts.producer_config["batch.size"] == "16384"


@pytest.mark.parametrize("key", ["kafka.key.serializer", "kafka.value.serializer"])
def test_serializers_are_refused(key: str) -> None:
    with pytest.raises(SinkOptionError, match=rf"'{key}' is not supported.*bytes"):
        SinkOptions.from_options({**BASE, key: "org.apache.kafka.StringSerializer"})


def test_a_transactional_id_is_refused_saying_why() -> None:
    # Each task's producer would share the id: the tasks would fence one another.
    with pytest.raises(SinkOptionError, match=r"'kafka.transactional.id' is not supported.*fence"):
        SinkOptions.from_options({**BASE, "kafka.transactional.id": "etl-1"})


def test_unknown_option_suggests_the_kafka_prefix() -> None:
    with pytest.raises(SinkOptionError, match=r"unknown option 'linger.ms'.*'kafka.linger.ms'"):
        SinkOptions.from_options({**BASE, "linger.ms": "5"})
    with pytest.raises(SinkOptionError, match=r"unknown option 'foo'"):
        SinkOptions.from_options({**BASE, "foo": "x"})


def test_spark_keys_are_accepted() -> None:
    opts = SinkOptions.from_options(
        {
            **BASE,
            "path": "/x",
            "checkpointlocation": "/ck",
            "queryname": "q",
            "includeheaders": "true",
        }
    )
    assert opts.checkpoint_location == "/ck"
    assert opts.query_name == "q"


def test_bootstrap_servers_required() -> None:
    with pytest.raises(SinkOptionError, match=r"kafka\.bootstrap\.servers' is required"):
        SinkOptions.from_options({"topic": "t"})


def test_empty_topic_refused() -> None:
    with pytest.raises(SinkOptionError, match="'topic' is empty"):
        SinkOptions.from_options({**BASE, "topic": "  "})


def test_option_errors_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        SinkOptions.from_options({})


def test_commit_dir_defaults(tmp_path) -> None:
    ck = str(tmp_path / "ck")
    stream = SinkOptions.from_options({**BASE, "checkpointlocation": ck})
    assert stream.commit_dir(streaming=True) == f"{ck}/pykafka-commits"
    assert stream.commit_dir(streaming=False) is None
    uri = SinkOptions.from_options({**BASE, "checkpointlocation": f"file:{ck}"})
    assert uri.commit_dir(streaming=True) == f"{ck}/pykafka-commits"
    remote = SinkOptions.from_options({**BASE, "checkpointlocation": "s3a://bucket/ck/"})
    assert remote.commit_dir(streaming=True) == "s3a://bucket/ck/pykafka-commits"
    unsupported = SinkOptions.from_options({**BASE, "checkpointlocation": "oss://bucket/ck"})
    assert unsupported.commit_dir(streaming=True) is None
    explicit = SinkOptions.from_options({**BASE, "commitlog": str(tmp_path / "log")})
    assert explicit.commit_dir(streaming=False) == str(tmp_path / "log")
    off = SinkOptions.from_options({**BASE, "checkpointlocation": ck, "commitlog": "none"})
    assert off.commit_dir(streaming=True) is None


def test_store_commit_log_accepted_and_unknown_scheme_refused() -> None:
    for uri in ("s3a://b/x", "s3://b/x", "gs://b/x", "abfss://c@a.dfs.core.windows.net/x"):
        assert SinkOptions.from_options({**BASE, "commitlog": uri + "/"}).commit_log == uri
    assert SinkOptions.from_options({**BASE, "commitlog": "hdfs://nn/x"}).commit_log == (
        "hdfs://nn/x"
    )
    with pytest.raises(SinkOptionError, match=r"'commitLog' has the scheme 'oss'.*s3a.*'none'"):
        SinkOptions.from_options({**BASE, "commitlog": "oss://bucket/x"})


def test_repr_hides_producer_values_and_pickles() -> None:
    opts = SinkOptions.from_options(
        {**BASE, "kafka.sasl.password": "hunter2", "kafka.security.protocol": "SASL_PLAINTEXT"}
    )
    assert "hunter2" not in repr(opts)
    assert "sasl.password" in repr(opts)
    assert pickle.loads(pickle.dumps(opts)) == opts


def test_producer_config_validated_without_network() -> None:
    SinkOptions.from_options({**BASE, "kafka.linger.ms": "5"}).validate_producer_config()
    with pytest.raises(SinkOptionError, match=r"unknown option 'kafka.no.such.key'"):
        SinkOptions.from_options({**BASE, "kafka.no.such.key": "1"})
    with pytest.raises(SinkOptionError, match=r"acks"):
        SinkOptions.from_options({**BASE, "kafka.acks": "most"}).validate_producer_config()


def test_producer_config_error_hides_secret_values() -> None:
    opts = SinkOptions.from_options(
        {
            **BASE,
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "PLAIN",
            "kafka.sasl.jaas.config": "garbage password=hunter2",
        }
    )
    with pytest.raises(SinkOptionError) as info:
        opts.validate_producer_config()
    assert "hunter2" not in str(info.value)


def test_unwritable_commit_log_fails_with_path_and_reason(tmp_path) -> None:
    # Tests run as root, where chmod stops nothing: a path under a regular file cannot be created.
    (tmp_path / "afile").write_text("x")
    target = tmp_path / "afile" / "commits"
    opts = SinkOptions.from_options({**BASE, "commitlog": str(target)})
    with pytest.raises(SinkOptionError) as info:
        opts.check_commit_dir(streaming=False)
    message = str(info.value)
    assert "'commitLog'" in message and str(target) in message
    assert "Not a directory" in message
    assert "'none'" in message  # the fix: another directory, or no commit files


def test_commit_log_that_is_a_file_is_refused(tmp_path) -> None:
    (tmp_path / "afile").write_text("x")
    opts = SinkOptions.from_options({**BASE, "commitlog": str(tmp_path / "afile")})
    with pytest.raises(SinkOptionError, match=r"'commitLog'.*afile.*not a directory"):
        opts.check_commit_dir(streaming=False)


def test_unwritable_default_commit_log_names_the_checkpoint(tmp_path) -> None:
    (tmp_path / "afile").write_text("x")
    ck = str(tmp_path / "afile" / "ck")
    opts = SinkOptions.from_options({**BASE, "checkpointlocation": ck})
    with pytest.raises(SinkOptionError) as info:
        opts.check_commit_dir(streaming=True)
    message = str(info.value)
    assert "'checkpointLocation'" in message and f"{ck}/pykafka-commits" in message
    assert "Not a directory" in message and "'commitLog'" in message


def test_writable_commit_log_is_created_and_left_empty(tmp_path) -> None:
    target = tmp_path / "new" / "commits"
    opts = SinkOptions.from_options({**BASE, "commitlog": str(target)})
    assert opts.check_commit_dir(streaming=False) == str(target)
    assert target.is_dir() and list(target.iterdir()) == []  # the probe file is gone


def test_streaming_commit_log_is_probed_once_per_process(tmp_path, monkeypatch) -> None:
    # Spark calls streamWriter() twice per micro-batch (planning, commit) in long-lived driver
    # workers: probing every time cost two requests per micro-batch in an object store.
    from kafka_sink.spark.commit_log import store as commit_store

    probes: list[str] = []
    real_probe = commit_store.LocalCommitStore.probe

    def counting_probe(self: commit_store.LocalCommitStore) -> None:
        probes.append(self.location)
        real_probe(self)

    monkeypatch.setattr(commit_store.LocalCommitStore, "probe", counting_probe)
    target = tmp_path / "commits"
    opts = SinkOptions.from_options({**BASE, "commitlog": str(target)})
    for _ in range(3):  # micro-batches 0..2 in the same driver-side worker
        assert opts.check_commit_dir(streaming=True) == str(target)
    assert probes == [str(target)]
    for _ in range(2):  # each batch write job is checked on its own
        assert opts.check_commit_dir(streaming=False) == str(target)
    assert len(probes) == 3


def test_streaming_commit_log_that_failed_is_probed_again(tmp_path) -> None:
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    opts = SinkOptions.from_options({**BASE, "commitlog": str(blocker / "commits")})
    with pytest.raises(SinkOptionError, match="Not a directory"):
        opts.check_commit_dir(streaming=True)
    blocker.unlink()  # fixed before the query is restarted: the next check must see it
    assert opts.check_commit_dir(streaming=True) == str(blocker / "commits")
    assert (blocker / "commits").is_dir()


def test_no_commit_log_means_nothing_to_check(tmp_path) -> None:
    (tmp_path / "afile").write_text("x")
    bad_ck = str(tmp_path / "afile" / "ck")
    batch = SinkOptions.from_options({**BASE, "checkpointlocation": bad_ck})
    assert batch.check_commit_dir(streaming=False) is None  # a batch write has no default log
    off = SinkOptions.from_options({**BASE, "checkpointlocation": bad_ck, "commitlog": "off"})
    assert off.check_commit_dir(streaming=True) is None
    unsupported = SinkOptions.from_options({**BASE, "checkpointlocation": "oss://b/ck-quiet"})
    assert unsupported.check_commit_dir(streaming=False) is None  # batch: nothing to say


def test_producer_idle_timeout_defaults_to_nine_minutes_and_is_parsed() -> None:
    assert SinkOptions.from_options(BASE).producer_idle_timeout_ms == 540_000
    # Spark lower-cases option names; the value is a whole number of milliseconds.
    opts = SinkOptions.from_options({**BASE, "produceridletimeoutms": " 1000 "})
    assert opts.producer_idle_timeout_ms == 1000
    assert "producerIdleTimeoutMs=1000" in repr(opts)
    assert (
        SinkOptions.from_options({**BASE, "producerIdleTimeoutMs": "0"}).producer_idle_timeout_ms
        == 0
    )
    assert (
        SinkOptions.from_options({**BASE, "producerIdleTimeoutMs": "-1"}).producer_idle_timeout_ms
        == -1
    )
    # Not a producer setting: it never reaches the producer's config (nor the cache key).
    assert "produceridletimeoutms" not in dict(opts.producer_items)


@pytest.mark.parametrize("value", ["", "abc", "1.5", "-2", "9m"])
def test_bad_producer_idle_timeout_is_refused_with_the_fix(value: str) -> None:
    with pytest.raises(SinkOptionError, match=r"option 'producerIdleTimeoutMs'.*milliseconds.*-1"):
        SinkOptions.from_options({**BASE, "producerIdleTimeoutMs": value})


def test_unknown_option_message_lists_producer_idle_timeout() -> None:
    with pytest.raises(SinkOptionError, match="producerIdleTimeoutMs"):
        SinkOptions.from_options({**BASE, "foo": "x"})


@pytest.mark.parametrize(
    ("key", "path"),
    [
        ("kafka.partitioner.class", "kafka_sink.testing.plugins.KeyDigitPartitioner"),
        ("kafka.partitioner.class", "kafka_sink.testing.plugins:last_partition"),
        (
            "kafka.interceptor.classes",
            "kafka_sink.testing.plugins.StampInterceptor,kafka_sink.testing.plugins:"
            "CountingInterceptor",
        ),
    ],
)
def test_plugin_import_paths_are_accepted_and_checked_on_the_driver(key: str, path: str) -> None:
    opts = SinkOptions.from_options({**BASE, key: path})
    opts.validate_producer_config()
    assert opts.producer_config[key.removeprefix("kafka.")] == path  # the path travels as is
    assert pickle.loads(pickle.dumps(opts)) == opts


@pytest.mark.parametrize("key", ["kafka.partitioner.class", "kafka.interceptor.classes"])
def test_plugin_path_that_does_not_import_names_the_option(key: str) -> None:
    opts = SinkOptions.from_options({**BASE, key: "no_such_module.Thing"})
    with pytest.raises(
        SinkOptionError,
        match=rf"option '{key}': cannot import 'no_such_module.Thing'.*every executor",
    ):
        opts.validate_producer_config()


def test_plugin_of_the_wrong_shape_names_the_option() -> None:
    opts = SinkOptions.from_options({**BASE, "kafka.partitioner.class": "json.JSONDecoder"})
    with pytest.raises(SinkOptionError, match=r"option 'kafka.partitioner.class': class .*"):
        opts.validate_producer_config()
