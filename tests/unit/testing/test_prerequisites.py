"""LocalKafka's and LocalSchemaRegistry's prerequisites without a JVM: package data, lookups, and
`fetch` with a fake mvn.

``java`` and ``mvn`` are found through PATH, so every test here builds its own PATH holding only
the fakes it wants. The fake mvn is a Python script that records its arguments and the POM it was
given, then acts as told by ``FAKE_MVN_MODE`` (write jars, fail like Maven, hang, write nothing):
``copy-dependencies`` writes the broker jars, ``package`` a registry build in ``target/``.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import kafka_sink.testing
from kafka_sink.testing import __main__ as cli
from kafka_sink.testing import local_kafka, local_schema_registry, prerequisites
from kafka_sink.testing.local_schema_registry import (
    SchemaRegistrySetupError,
    fetch_schema_registry,
    find_schema_registry_dir,
    schema_registry_version,
)
from kafka_sink.testing.prerequisites import (
    FETCHED_MARKER,
    MAVEN_COPY_GOAL,
    KafkaSetupError,
    fetch_kafka_jars,
    find_conf_dir,
    kafka_version,
)

PACKAGE_DIR = Path(kafka_sink.testing.__file__).resolve().parent

FAKE_MVN = """#!{python}
import json, os, pathlib, sys, time
args = sys.argv[1:]
log = pathlib.Path(os.environ["FAKE_MVN_LOG"])
pom = pathlib.Path(args[args.index("-f") + 1]).read_text()
with log.open("a") as fh:
    fh.write(json.dumps({{"args": args, "pom": pom, "cwd": os.getcwd()}}) + "\\n")
mode = os.environ.get("FAKE_MVN_MODE", "ok")
if mode == "fail":
    print("[ERROR] Failed to execute goal on project kafka-broker-classpath: Could not resolve "
          "dependencies: org.apache.kafka:kafka_2.13:jar:4.3.1 was not found")
    sys.exit(1)
if mode == "hang":
    time.sleep(120)
if "package" in args:
    out = pathlib.Path(args[args.index("-f") + 1]).parent / "target"
    names = ("schema-registry-1-runner.jar", "lib/io.apicurio.apicurio-registry-app.jar")
else:
    out = pathlib.Path(next(a for a in args if a.startswith("-DoutputDirectory="))
                       .split("=", 1)[1])
    names = ("kafka_2.13-4.3.1.jar", "kafka-clients-4.3.1.jar", "scala-library-2.13.18.jar")
out.mkdir(parents=True)
if mode == "ok":
    for name in names:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(b"PK")
"""


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty directory that is the whole PATH; tests add fakes to it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.delenv("MAVEN_HOME", raising=False)
    monkeypatch.delenv("KAFKA_JARS_DIR", raising=False)
    monkeypatch.delenv("SCHEMA_REGISTRY_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("FAKE_MVN_LOG", str(tmp_path / "mvn.log"))
    return bin_dir


def _add_java(bin_dir: Path) -> None:
    java = bin_dir / "java"
    java.write_text("#!/bin/sh\nexit 0\n")
    java.chmod(0o755)


def _add_mvn(bin_dir: Path) -> None:
    mvn = bin_dir / "mvn"
    mvn.write_text(FAKE_MVN.format(python=sys.executable))
    mvn.chmod(0o755)


def _mvn_calls(tmp_path: Path) -> list[dict[str, object]]:
    log = tmp_path / "mvn.log"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


# -- package data and public names -------------------------------------------------------------


def test_templates_and_pom_are_package_data() -> None:
    conf = find_conf_dir()
    assert conf == PACKAGE_DIR / "conf"
    for name in (
        "broker-single.properties",
        "broker-cluster.properties",
        "log4j2-broker.properties",
        "kafka-broker.pom.xml",
        "schema-registry.pom.xml",
    ):
        assert (conf / name).is_file(), name
    assert kafka_version() == "4.3.1"
    assert schema_registry_version() == "2.1.5.Final"
    assert "kafka.version>4.3.1<" in (conf / "kafka-broker.pom.xml").read_text()


def test_pyproject_ships_every_conf_file() -> None:
    import tomllib

    pyproject = tomllib.loads((PACKAGE_DIR.parents[1] / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["kafka_sink.testing"]
    shipped = {p.name for pattern in patterns for p in PACKAGE_DIR.glob(pattern)}
    assert shipped == {p.name for p in (PACKAGE_DIR / "conf").iterdir()}


def test_readme_names_are_importable() -> None:
    from kafka_sink.testing import KafkaSetupError as Setup
    from kafka_sink.testing import KafkaStartError, LocalKafka, fetch_kafka_jars, find_jars_dir

    assert LocalKafka is local_kafka.LocalKafka
    assert KafkaStartError is local_kafka.KafkaStartError
    assert Setup is local_kafka.KafkaSetupError is prerequisites.KafkaSetupError
    assert fetch_kafka_jars is prerequisites.fetch_kafka_jars
    assert find_jars_dir is local_kafka.find_jars_dir
    from kafka_sink.testing import LocalSchemaRegistry

    assert LocalSchemaRegistry is local_schema_registry.LocalSchemaRegistry


def test_jars_found_in_the_user_cache_without_settings(
    tools: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No checkout around: as for an installed wheel run from some other directory.
    monkeypatch.setattr(prerequisites, "_checkout_roots", lambda: [tmp_path / "elsewhere"])
    with pytest.raises(KafkaSetupError, match=r"python -m kafka_sink\.testing fetch") as err:
        prerequisites.find_jars_dir()
    cache = tmp_path / "xdg-cache" / "pykafka" / "kafka" / "4.3.1" / "lib"
    assert str(cache) in str(err.value)
    cache.mkdir(parents=True)
    (cache / "kafka_2.13-4.3.1.jar").write_bytes(b"PK")
    assert prerequisites.find_jars_dir() == cache
    assert prerequisites.default_jars_dir() == cache


# -- fetch: missing tools ----------------------------------------------------------------------


def test_fetch_without_java_says_to_install_a_jdk(tools: Path, tmp_path: Path) -> None:
    _add_mvn(tools)
    with pytest.raises(KafkaSetupError, match=r"`java` not found \(PATH or JAVA_HOME\).*JDK 17"):
        fetch_kafka_jars(tmp_path / "lib")
    assert not (tmp_path / "lib").exists()
    assert _mvn_calls(tmp_path) == []


def test_fetch_without_mvn_says_to_install_maven(tools: Path, tmp_path: Path) -> None:
    _add_java(tools)
    with pytest.raises(KafkaSetupError, match=r"`mvn` not found.*Apache Maven.*KAFKA_JARS_DIR"):
        fetch_kafka_jars(tmp_path / "lib")
    assert not (tmp_path / "lib").exists()
    with pytest.raises(KafkaSetupError, match="not found or not executable"):
        fetch_kafka_jars(tmp_path / "lib", mvn=str(tmp_path / "no-such-mvn"))


def test_cli_fetch_without_mvn_exits_2_with_the_reason(tools: Path, tmp_path: Path) -> None:
    _add_java(tools)
    done = subprocess.run(
        [sys.executable, "-m", "kafka_sink.testing", "fetch", "--dest", str(tmp_path / "lib")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: `mvn` not found")
    assert done.stdout == ""


# -- fetch: with a fake Maven ------------------------------------------------------------------


def test_fetch_runs_maven_on_the_packaged_pom(tools: Path, tmp_path: Path) -> None:
    _add_java(tools)
    _add_mvn(tools)
    dest = tmp_path / "jars" / "lib"
    lines: list[str] = []
    assert fetch_kafka_jars(dest, log=lines.append) == dest
    assert sorted(p.name for p in dest.glob("*.jar")) == [
        "kafka-clients-4.3.1.jar",
        "kafka_2.13-4.3.1.jar",
        "scala-library-2.13.18.jar",
    ]
    pom = (find_conf_dir() / "kafka-broker.pom.xml").read_text()
    assert (dest / FETCHED_MARKER).read_text().strip() == hashlib.sha256(pom.encode()).hexdigest()
    [call] = _mvn_calls(tmp_path)
    args = call["args"]
    assert isinstance(args, list)
    assert args[:2] == ["-B", "-q"]
    assert "-o" not in args
    assert MAVEN_COPY_GOAL in args
    assert "-DincludeScope=runtime" in args
    assert call["pom"] == pom
    # Maven ran outside the package and wrote into a sibling of dest, which is gone now.
    assert not str(call["cwd"]).startswith(str(PACKAGE_DIR))
    assert sorted(p.name for p in dest.parent.iterdir()) == ["lib"]
    assert lines[0] == f"fetching Kafka 4.3.1 broker jars with Maven into {dest}"
    assert lines[-1] == f"3 jars in {dest}"

    # Fetched already: Maven is not run again, unless forced; offline passes -o.
    assert fetch_kafka_jars(dest) == dest
    assert len(_mvn_calls(tmp_path)) == 1
    fetch_kafka_jars(dest, force=True, offline=True)
    calls = _mvn_calls(tmp_path)
    assert len(calls) == 2
    assert "-o" in calls[1]["args"]


def test_fetch_goes_to_kafka_jars_dir_then_the_user_cache(
    tools: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _add_java(tools)
    _add_mvn(tools)
    cache = tmp_path / "xdg-cache" / "pykafka" / "kafka" / "4.3.1" / "lib"
    assert fetch_kafka_jars() == cache
    assert (cache / "kafka_2.13-4.3.1.jar").is_file()
    monkeypatch.setenv("KAFKA_JARS_DIR", str(tmp_path / "from-env"))
    assert fetch_kafka_jars() == tmp_path / "from-env"
    assert local_kafka.find_jars_dir() == tmp_path / "from-env"


def test_a_failed_fetch_keeps_the_previous_jars_and_shows_maven_output(
    tools: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _add_java(tools)
    _add_mvn(tools)
    dest = tmp_path / "lib"
    fetch_kafka_jars(dest)
    before = sorted(p.name for p in dest.iterdir())
    monkeypatch.setenv("FAKE_MVN_MODE", "fail")
    with pytest.raises(KafkaSetupError) as err:
        fetch_kafka_jars(dest, force=True, offline=True)
    message = str(err.value)
    assert "Maven failed (exit 1) fetching the Kafka 4.3.1 broker jars" in message
    assert "Could not resolve dependencies: org.apache.kafka:kafka_2.13:jar:4.3.1" in message
    assert "fetch once without --offline" in message
    assert sorted(p.name for p in dest.iterdir()) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []

    monkeypatch.setenv("FAKE_MVN_MODE", "empty")
    with pytest.raises(KafkaSetupError, match=r"left no kafka_2\.13-\*\.jar"):
        fetch_kafka_jars(dest, force=True)
    assert sorted(p.name for p in dest.iterdir()) == before


def test_a_hanging_maven_is_stopped_at_the_timeout(
    tools: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _add_java(tools)
    _add_mvn(tools)
    monkeypatch.setenv("FAKE_MVN_MODE", "hang")
    with pytest.raises(KafkaSetupError, match=r"did not finish .* within 2s"):
        fetch_kafka_jars(tmp_path / "lib", timeout_s=2.0)
    assert not (tmp_path / "lib").exists()


def test_fetch_never_replaces_a_directory_it_did_not_fill(tools: Path, tmp_path: Path) -> None:
    _add_java(tools)
    _add_mvn(tools)
    dest = tmp_path / "mine"
    dest.mkdir()
    (dest / "notes.txt").write_text("keep me")
    with pytest.raises(KafkaSetupError, match="not a jars directory from an earlier fetch"):
        fetch_kafka_jars(dest)
    assert (dest / "notes.txt").read_text() == "keep me"
    assert _mvn_calls(tmp_path) == []
    # An empty directory, or one that `make setup` filled (empty marker), is fair game.
    (dest / "notes.txt").unlink()
    assert fetch_kafka_jars(dest) == dest
    (dest / FETCHED_MARKER).write_text("")
    fetch_kafka_jars(dest)
    assert len(_mvn_calls(tmp_path)) == 2


def test_cli_fetch_prints_the_directory(
    tools: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _add_java(tools)
    _add_mvn(tools)
    dest = tmp_path / "lib"
    assert cli.main(["fetch", "--dest", str(dest), "--offline"]) == 0
    out, err = capsys.readouterr()
    assert out == f"{dest}\n"
    assert "fetching Kafka 4.3.1 broker jars with Maven" in err
    assert "-o" in _mvn_calls(tmp_path)[0]["args"]


def test_cli_help_names_both_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["--help"])
    assert done.value.code == 0
    assert "fetch --help" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["fetch", "--help"])
    assert "--offline" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["run", "--nodes", "2"])
    assert "invalid choice" in capsys.readouterr().err


# -- the Schema Registry build ------------------------------------------------------------------


def test_registry_build_not_found_says_how_to_fetch_it(
    tools: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prerequisites, "_checkout_roots", lambda: [tmp_path / "elsewhere"])
    cache = tmp_path / "xdg-cache" / "pykafka" / "schema-registry" / "2.1.5.Final"
    with pytest.raises(SchemaRegistrySetupError) as err:
        find_schema_registry_dir()
    message = str(err.value)
    assert "python -m kafka_sink.testing fetch schema-registry" in message
    assert "SCHEMA_REGISTRY_DIR" in message
    assert str(cache) in message
    # What a setup error of the harness is: the fixtures and the CLI catch KafkaSetupError.
    assert isinstance(err.value, KafkaSetupError)

    _add_java(tools)
    _add_mvn(tools)
    assert fetch_schema_registry() == cache
    assert find_schema_registry_dir() == cache


def test_cli_fetch_schema_registry_runs_the_quarkus_build_of_the_packaged_pom(
    tools: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _add_java(tools)
    _add_mvn(tools)
    dest = tmp_path / "registry"
    assert cli.main(["fetch", "schema-registry", "--dest", str(dest), "--offline"]) == 0
    out, err = capsys.readouterr()
    assert out == f"{dest}\n"
    assert f"fetching Apicurio Registry 2.1.5.Final build with Maven into {dest}" in err
    assert f"2 jars in {dest}" in err
    [call] = _mvn_calls(tmp_path)
    args = call["args"]
    assert isinstance(args, list)
    assert args[-2:] == ["package", "-DskipTests"]
    assert "-o" in args
    pom = (find_conf_dir() / "schema-registry.pom.xml").read_text()
    assert call["pom"] == pom
    assert (dest / "schema-registry-1-runner.jar").is_file()
    assert (dest / "lib" / "io.apicurio.apicurio-registry-app.jar").is_file()
    assert (dest / FETCHED_MARKER).read_text().strip() == hashlib.sha256(pom.encode()).hexdigest()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []

    # Fetched already: Maven is not run again.
    assert cli.main(["fetch", "schema-registry", "--dest", str(dest)]) == 0
    assert len(_mvn_calls(tmp_path)) == 1


def test_registry_fetch_and_lookup_follow_schema_registry_dir(
    tools: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _add_java(tools)
    _add_mvn(tools)
    monkeypatch.setenv("SCHEMA_REGISTRY_DIR", str(tmp_path / "from-env"))
    assert fetch_schema_registry() == tmp_path / "from-env"
    assert find_schema_registry_dir() == tmp_path / "from-env"
    monkeypatch.setenv("FAKE_MVN_MODE", "empty")
    with pytest.raises(SchemaRegistrySetupError, match=r"left no \*-runner\.jar"):
        fetch_schema_registry(force=True)
    assert find_schema_registry_dir() == tmp_path / "from-env"
