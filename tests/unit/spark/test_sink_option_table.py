"""The options table is the one list: SinkOptions' defaults, the accepted names, README's table."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from kafka_sink.formats.options import FORMAT_OPTION_NAMES, REGISTRY_PREFIX
from kafka_sink.sink_errors import SinkOptionError
from kafka_sink.spark.option_names import SINK_KEYS, SPARK_KEYS, SPARK_OPTION_NAMES
from kafka_sink.spark.option_table import SINK_OPTIONS, Applies, SinkOption
from kafka_sink.spark.options import SinkOptions

README = Path(__file__).resolve().parents[3] / "README.md"
# README's rows for the producer settings, which the table leaves to ProducerConfig.
README_PRODUCER_ROWS = {"kafka.bootstrap.servers", "kafka.<producer key>"}
BASE = {"kafka.bootstrap.servers": "localhost:9092"}


def readme_options(text: str) -> dict[str, str]:
    """README's options table (the first table under '### Options'): each name -> its row."""
    lines = text.splitlines()
    start = lines.index("### Options")
    rows: dict[str, str] = {}
    in_table = False
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            in_table = True
            first_cell = line.split("|")[1]
            for name in re.findall(r"`([^`]+)`", first_cell):
                rows[name] = line
        elif in_table:
            break
    return rows


def _shown_default(default: object) -> str:
    return str(default)


def test_every_row_fills_a_field_whose_default_is_the_rows() -> None:
    fields = {f.name: f for f in dataclasses.fields(SinkOptions)}
    filled = [row.attr for row in SINK_OPTIONS if row.attr is not None]
    assert len(filled) == len(set(filled))
    # producer_items are the kafka.* options; commit_log_disabled is commitLog's 'none'.
    assert set(fields) - set(filled) == {"producer_items", "commit_log_disabled"}
    for row in SINK_OPTIONS:
        if row.attr is not None:
            assert row.parse is not None, row.name
            declared = fields[row.attr].default
            if declared is dataclasses.MISSING:  # topic: every SinkOptions(...) call names it
                declared = None
            assert declared == row.default, row.name
        else:
            assert row.parse is None, row.name


def test_options_left_out_take_the_rows_defaults() -> None:
    parsed = SinkOptions.from_options(BASE)
    for row in SINK_OPTIONS:
        if row.attr is not None:
            assert getattr(parsed, row.attr) == row.default, row.name


def test_the_accepted_names_are_the_tables() -> None:
    sinks = {row.key for row in SINK_OPTIONS if not row.spark}
    formats = {name.lower() for name in FORMAT_OPTION_NAMES}
    sparks = {row.key for row in SINK_OPTIONS if row.spark}
    assert (sinks | formats, sparks) == (SINK_KEYS, SPARK_KEYS)
    assert SPARK_OPTION_NAMES == ("path", "checkpointLocation", "queryName")


@pytest.mark.parametrize(
    "row",
    [
        row
        for row in SINK_OPTIONS
        if row.applies in (Applies.EXACTLY_ONCE, Applies.EXACTLY_ONCE_BATCH)
    ],
    ids=lambda row: row.name,
)
def test_an_exactly_once_option_is_refused_at_least_once(row: SinkOption) -> None:
    values = {"transactionalIdPrefix": "p", "intentStore": "kafka", "intentTopic": "t"}
    given = {row.name.lower(): values.get(row.name, "key-1")}
    with pytest.raises(SinkOptionError, match=f"option '{row.name}' is only used with"):
        SinkOptions.from_options({**BASE, **given})


def readme_mismatches(text: str) -> list[str]:
    """What README's options table says otherwise than the table: names, then defaults."""
    rows = readme_options(text)
    expected = {row.name for row in SINK_OPTIONS} | set(FORMAT_OPTION_NAMES)
    expected |= {REGISTRY_PREFIX + "*"} | README_PRODUCER_ROWS
    problems = [f"README lacks option {name!r}" for name in sorted(expected - set(rows))]
    problems += [f"README lists unknown option {name!r}" for name in sorted(set(rows) - expected)]
    for row in SINK_OPTIONS:
        line = rows.get(row.name)
        if line is None or row.default is None:
            continue
        shown = re.escape(f"`{_shown_default(row.default)}`")
        if not re.search(rf"default {shown}|{shown} \(default", line, re.IGNORECASE):
            problems.append(f"README's {row.name!r} row lacks its default {row.default!r}")
    return problems


def test_readme_lists_exactly_the_tables_options_with_their_defaults() -> None:
    assert readme_mismatches(README.read_text(encoding="utf-8")) == []


def test_the_readme_check_catches_a_missing_row_and_a_wrong_default() -> None:
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    without = "\n".join(line for line in lines if not line.startswith("| `intentStore` |"))
    assert readme_mismatches(without) == ["README lacks option 'intentStore'"]
    wrong = text.replace("Default `540000`", "Default `600000`")
    assert wrong != text
    assert readme_mismatches(wrong) == [
        "README's 'producerIdleTimeoutMs' row lacks its default 540000"
    ]
