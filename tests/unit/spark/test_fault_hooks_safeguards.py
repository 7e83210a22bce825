"""No environment turns a safeguard off: the fence, the start sweep and the slot choice
(``fault_hooks.safeguards``) are on in every process the package starts, whatever it inherits,
and only a test's own fixture leaves one out (``tests/spark/weakened.py`` for Spark's workers)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from kafka_sink.spark import fault_hooks
from tests.spark.weakened import weakened_env

PACKAGE = Path(fault_hooks.__file__).resolve().parents[1]
SHOW = "from kafka_sink.spark import fault_hooks; print(fault_hooks.safeguards)"
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


def test_the_package_reads_no_test_variable_but_the_pauses() -> None:
    # The pause directory and point hold a step or fail a read; nothing else may be read.
    found = {
        (path.relative_to(PACKAGE).as_posix(), name)
        for path in PACKAGE.rglob("*.py")
        for name in re.findall(r"PYKAFKA_TEST_\w+", path.read_text(encoding="utf-8"))
    }
    assert {name for _path, name in found} <= {fault_hooks.PAUSE_ENV, fault_hooks.POINT_ENV}
    assert {path for path, _name in found} == {"spark/fault_hooks.py"}


def test_only_a_process_started_with_a_weakened_path_leaves_a_safeguard_out(
    tmp_path: Path,
) -> None:
    env = weakened_env(os.environ, tmp_path / "unfenced", fence=False)
    assert _safeguards_in_child(env) == repr(fault_hooks.Safeguards(fence=False))
    assert fault_hooks.safeguards == fault_hooks.Safeguards()  # this process is untouched
