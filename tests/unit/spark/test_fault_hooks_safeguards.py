"""No environment turns a safeguard off or injects a fault: the fence, the start sweep and the slot
choice (``fault_hooks.safeguards``) are on, and no pause or unreadable marker
(``fault_hooks.faults``) happens, in every process the package starts, whatever it inherits. Only
a test's own fixture leaves a safeguard out (``tests/spark/weakened.py`` for Spark's workers) or
installs the environment's faults (``tests/fault_site``, on the path of the processes the tests
start)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from kafka_sink.spark import fault_hooks
from tests.fault_site.fault_env import MARKER_UNREADABLE, PAUSE_ENV, POINT_ENV
from tests.spark.weakened import weakened_env

PACKAGE = Path(fault_hooks.__file__).resolve().parents[1]
SHOW = "from kafka_sink.spark import fault_hooks; print(fault_hooks.safeguards)"
SHOW_FAULTS = (
    "from kafka_sink.spark import fault_hooks; "
    "print(fault_hooks.safeguards, fault_hooks.marker_unreadable())"
)
FAULT_SITE = Path(__file__).resolve().parents[2] / "fault_site"
# The variables that once turned the safeguards off, and what a guess at another would look like.
FORMER_SWITCHES = (
    "PYKAFKA_TEST_NO_FENCE",
    "PYKAFKA_TEST_NO_START_SWEEP",
    "PYKAFKA_TEST_EVERY_SLOT_FREE",
    "PYKAFKA_TEST_NO_SLOT_CHOICE",
)


def _safeguards_in_child(env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", SHOW], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_a_process_with_the_former_switches_set_keeps_every_safeguard() -> None:
    env = {**os.environ, **dict.fromkeys(FORMER_SWITCHES, "1")}
    assert _safeguards_in_child(env) == repr(fault_hooks.Safeguards())
    assert fault_hooks.Safeguards() == fault_hooks.Safeguards(
        fence=True, start_sweep=True, slot_choice=True
    )


def test_the_package_reads_no_test_variable() -> None:
    found = {
        (path.relative_to(PACKAGE).as_posix(), name)
        for path in PACKAGE.rglob("*.py")
        for name in re.findall(r"PYKAFKA_TEST_\w+", path.read_text(encoding="utf-8"))
    }
    assert found == set()
    source = Path(fault_hooks.__file__).read_text(encoding="utf-8")
    assert "import os" not in source and "getenv" not in source


def _without_fault_site(env: dict[str, str]) -> dict[str, str]:
    path = env.get("PYTHONPATH", "").split(os.pathsep)
    return {**env, "PYTHONPATH": os.pathsep.join(p for p in path if p and p != str(FAULT_SITE))}


def test_the_pause_variables_do_nothing_in_a_process_without_the_test_faults(
    tmp_path: Path,
) -> None:
    (tmp_path / MARKER_UNREADABLE).touch()
    env = {**os.environ, PAUSE_ENV: str(tmp_path), POINT_ENV: fault_hooks.STARTED}
    pause = (
        "from kafka_sink.spark import fault_hooks; "
        "fault_hooks.pause_commit(None, fault_hooks.STARTED); "
        "print(fault_hooks.marker_unreadable())"
    )
    done = subprocess.run(
        [sys.executable, "-c", pause],
        env=_without_fault_site(env),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert done.stdout.strip() == "False"
    assert not (tmp_path / "paused-started").exists()  # the package held nothing


def test_a_process_started_with_the_test_path_follows_the_pause_variables(
    tmp_path: Path,
) -> None:
    (tmp_path / MARKER_UNREADABLE).touch()
    env = {**os.environ, PAUSE_ENV: str(tmp_path)}
    assert str(FAULT_SITE) in env["PYTHONPATH"].split(os.pathsep)  # tests/conftest.py put it
    done = subprocess.run(
        [sys.executable, "-c", SHOW_FAULTS], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == f"{fault_hooks.Safeguards()!r} True"


def test_only_a_process_started_with_a_weakened_path_leaves_a_safeguard_out(
    tmp_path: Path,
) -> None:
    env = weakened_env(os.environ, tmp_path / "unfenced", fence=False)
    assert _safeguards_in_child(env) == repr(fault_hooks.Safeguards(fence=False))
    assert fault_hooks.safeguards == fault_hooks.Safeguards()  # this process is untouched


def test_a_weakened_process_follows_the_pause_variables_too(tmp_path: Path) -> None:
    # weakened.py's sitecustomize shadows the one of tests/fault_site: it installs both.
    pause_dir = tmp_path / "pause"
    pause_dir.mkdir()
    (pause_dir / MARKER_UNREADABLE).touch()
    env = weakened_env(
        _without_fault_site({**os.environ, PAUSE_ENV: str(pause_dir)}),
        tmp_path / "unswept",
        start_sweep=False,
    )
    done = subprocess.run(
        [sys.executable, "-c", SHOW_FAULTS], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == f"{fault_hooks.Safeguards(start_sweep=False)!r} True"
