"""Benchmark: registry-format payloads for a column of ~300-byte structs, three ways per format.

The rows (the registry-format benchmark's struct: ints, strings, a decimal, a timestamp, an
array and a nullable field) are encoded to framed payloads (magic byte, schema id, payload).

Avro:

* ``columnar``: ``AvroColumnEncoder`` + ``frame_column`` on Arrow batches of 10,000 rows (the
  batch size Spark hands a Python data source), no Python per row;
* ``fastavro-per-row``: fastavro's ``schemaless_writer`` on each row's dict, with the header;
* ``confluent-kafka``: confluent-kafka's ``AvroSerializer`` (over a mock registry) on each dict.

JSON Schema:

* ``columnar``: ``JsonColumnEncoder`` + ``frame_column``, the same batches;
* ``json.dumps-per-row``: the header and the stdlib's ``json.dumps`` of each row's dict;
* ``confluent-kafka``: confluent-kafka's ``JSONSerializer`` (validating each dict against the
  derived schema, as it always does) on each dict.

Protobuf:

* ``columnar``: ``ProtobufSerializer.serialize_column`` (``ProtobufColumnEncoder`` and the
  framing with the message-index list), the same batches;
* ``protobuf-per-row (dicts)``: ``ProtobufSerializer`` on each row's dict (the ``protobuf``
  library's message filled and serialized per row);
* ``confluent-kafka``: confluent-kafka's ``ProtobufSerializer`` on each row's message object
  (built beforehand, untimed).

The per-row routes get their rows as ready Python dicts (converting the Arrow batch to dicts,
which a Spark UDF route also pays, is not timed; for JSON the dicts are JSON-ready already:
decimals as floats, timestamps as strings), so the ratios favour them. Each route runs
``--repeat`` times round-robin and its best run counts; wall time and this process's CPU time
are shown per 1M rows. Before timing, every route's payloads of the first batch are checked
equal: Avro byte for byte, JSON parsed (key order and spacing may differ) and its header byte
for byte.

    python benchmarks/bench_formats.py [--rows 200000] [--repeat 3]
                                       [--format avro|json|protobuf|all]
                                       [--out results/bench_formats.md]
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import io
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from kafka_sink.formats.avro_columnar import AvroColumnEncoder
from kafka_sink.formats.avro_schema import derive_avro_schema
from kafka_sink.formats.json_columnar import JsonColumnEncoder
from kafka_sink.formats.json_schema import derive_json_schema
from kafka_sink.formats.protobuf_schema import derive_protobuf_schema
from kafka_sink.formats.protobuf_serializer import ProtobufSerializer
from kafka_sink.formats.sql_types import sql_type_from_arrow
from kafka_sink.formats.wire_format import frame_column, header

BATCH_ROWS = 10_000
SCHEMA_ID = 1
ROW_TYPE = pa.struct(
    [
        pa.field("order_id", pa.int64(), nullable=False),
        pa.field("customer_id", pa.int32(), nullable=False),
        pa.field("customer", pa.string()),
        pa.field("email", pa.string()),
        pa.field("sku", pa.string()),
        pa.field("quantity", pa.int32()),
        pa.field("amount", pa.decimal128(12, 2)),
        pa.field("created_at", pa.timestamp("us", tz="UTC")),
        pa.field("tags", pa.list_(pa.string())),
        pa.field("scores", pa.list_(pa.int64())),
        pa.field("note", pa.string()),  # mostly null
        pa.field("address", pa.string()),
    ]
)


def make_batches(rows: int) -> list[pa.RecordBatch]:
    rng = np.random.default_rng(7)
    batches = []
    for start in range(0, rows, BATCH_ROWS):
        n = min(BATCH_ROWS, rows - start)
        ids = np.arange(start, start + n, dtype=np.int64)
        customers = rng.integers(0, 1_000_000, n)
        amounts = rng.integers(-(10**9), 10**9, n)
        created = 1_700_000_000_000_000 + rng.integers(0, 10**12, n)
        tag_pool = ["new", "gift", "express", "bulk", "return", "vip"]
        columns = {
            "order_id": pa.array(ids),
            "customer_id": pa.array(customers.astype(np.int32)),
            "customer": pa.array([f"Customer Name {c:07d}" for c in customers.tolist()]),
            "email": pa.array(
                [f"firstname.lastname.{c:07d}@mail.example.com" for c in customers.tolist()]
            ),
            "sku": pa.array(
                [f"SKU-{int(x):08d}-XL-BLUE-COTTON-SHIRT" for x in rng.integers(0, 10**8, n)]
            ),
            "quantity": pa.array(rng.integers(1, 50, n).astype(np.int32)),
            "amount": pa.array(
                [decimal.Decimal(int(a)).scaleb(-2) for a in amounts.tolist()],
                type=pa.decimal128(12, 2),
            ),
            "created_at": pa.array(created, type=pa.timestamp("us", tz="UTC")),
            "tags": pa.array([[tag_pool[(i + k) % 6] for k in range(i % 4)] for i in ids.tolist()]),
            "scores": pa.array([[i % 97, i % 89, i % 83] for i in ids.tolist()]),
            "note": pa.array(
                [None if i % 5 else f"leave at the door, order {i}" for i in ids.tolist()]
            ),
            "address": pa.array(
                [
                    f"{i % 999} Long Street Name, Apartment {i % 77}, Building {i % 13}, "
                    f"Floor {i % 9}, Door {i % 4}, 12345 Some City, Some Region, Some Country, "
                    "delivery between nine and five"
                    for i in ids.tolist()
                ]
            ),
        }
        struct = pa.StructArray.from_arrays(list(columns.values()), fields=list(ROW_TYPE))
        batches.append(pa.RecordBatch.from_arrays([struct], names=["value"]))
    return batches


Routes = dict[str, Callable[[], Any]]


def avro_routes(batches: list[pa.RecordBatch]) -> tuple[Routes, float]:
    """The Avro routes, checked equal byte for byte on the first batch; the mean payload size."""
    import fastavro
    from confluent_kafka.schema_registry.avro import AvroSerializer

    schema = derive_avro_schema(sql_type_from_arrow(ROW_TYPE))
    dict_batches = [b.column(0).to_pylist() for b in batches]
    encoder = AvroColumnEncoder(schema)
    parsed = fastavro.parse_schema(schema.json)
    prefix = header(SCHEMA_ID)
    registry = _mock_registry(schema.text, "AVRO")
    confluent = AvroSerializer(
        registry, schema.text, conf={"auto.register.schemas": False, "use.latest.version": True}
    )
    context = _context()

    def per_row(rows_of: list[list[Any]]) -> list[list[bytes]]:
        out = []
        for rows in rows_of:
            payloads = []
            for row in rows:
                buffer = io.BytesIO()
                buffer.write(prefix)
                fastavro.schemaless_writer(buffer, parsed, row)
                payloads.append(buffer.getvalue())
            out.append(payloads)
        return out

    def confluent_kafka(rows_of: list[list[Any]]) -> list[list[bytes]]:
        return [[confluent(row, context) for row in rows] for rows in rows_of]

    first = frame_column(encoder.encode(batches[0].column(0)), SCHEMA_ID).to_pylist()
    assert per_row(dict_batches[:1])[0] == first, (
        "fastavro's payloads differ from the columnar ones"
    )
    assert confluent_kafka(dict_batches[:1])[0] == first, "confluent-kafka's payloads differ"
    routes: Routes = {
        "columnar": lambda: [frame_column(encoder.encode(b.column(0)), SCHEMA_ID) for b in batches],
        "fastavro-per-row": lambda: per_row(dict_batches),
        "confluent-kafka AvroSerializer": lambda: confluent_kafka(dict_batches),
    }
    return routes, sum(len(p) for p in first) / len(first)


def json_ready(row: dict[str, Any]) -> dict[str, Any]:
    """A row as a JSON-only dict: decimals as floats, timestamps as the ISO text we write."""
    out = dict(row)
    out["amount"] = None if row["amount"] is None else float(row["amount"])
    at = row["created_at"]
    out["created_at"] = None if at is None else at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return out


def json_routes(batches: list[pa.RecordBatch]) -> tuple[Routes, float]:
    """The JSON routes, checked equal (parsed; headers byte for byte) on the first batch."""
    from confluent_kafka.schema_registry.json_schema import JSONSerializer

    schema = derive_json_schema(sql_type_from_arrow(ROW_TYPE))
    dict_batches = [[json_ready(r) for r in b.column(0).to_pylist()] for b in batches]
    encoder = JsonColumnEncoder(schema)
    prefix = header(SCHEMA_ID)
    registry = _mock_registry(schema.text, "JSON")
    confluent = JSONSerializer(
        schema.text, registry, conf={"auto.register.schemas": False, "use.latest.version": True}
    )
    context = _context()

    def per_row(rows_of: list[list[Any]]) -> list[list[bytes]]:
        return [[prefix + json.dumps(row).encode() for row in rows] for rows in rows_of]

    def confluent_kafka(rows_of: list[list[Any]]) -> list[list[bytes]]:
        return [[confluent(row, context) for row in rows] for rows in rows_of]

    first = frame_column(encoder.encode(batches[0].column(0)), SCHEMA_ID).to_pylist()
    for name, route in (("json.dumps", per_row), ("confluent-kafka", confluent_kafka)):
        theirs = route(dict_batches[:1])[0]
        assert [p[:5] for p in theirs] == [p[:5] for p in first], f"{name}'s headers differ"
        parsed = [json.loads(p[5:]) for p in theirs]
        assert parsed == [json.loads(p[5:]) for p in first], f"{name}'s payloads differ"
    routes: Routes = {
        "columnar": lambda: [frame_column(encoder.encode(b.column(0)), SCHEMA_ID) for b in batches],
        "json.dumps-per-row": lambda: per_row(dict_batches),
        "confluent-kafka JSONSerializer": lambda: confluent_kafka(dict_batches),
    }
    return routes, sum(len(p) for p in first) / len(first)


def protobuf_routes(batches: list[pa.RecordBatch]) -> tuple[Routes, float]:
    """The Protobuf routes, checked equal byte for byte on the first batch."""
    from confluent_kafka.schema_registry._sync.mock_schema_registry_client import (
        MockSchemaRegistryClient,
    )
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer as Confluent

    schema = derive_protobuf_schema(sql_type_from_arrow(ROW_TYPE), "Order")
    ours = ProtobufSerializer(schema, SCHEMA_ID)
    dict_batches = [b.column(0).to_pylist() for b in batches]
    message = ours.message_class()
    # confluent-kafka registers the schema from the generated class (its mock registry reads no
    # .proto text): the first registration, id 1.
    registry = MockSchemaRegistryClient({"url": "mock://bench"})
    confluent = Confluent(message, registry, {"use.deprecated.format": False})
    context = _context()
    # confluent-kafka takes message objects: built here, untimed (a UDF route would pay it).
    message_batches = [[message.FromString(ours(r)[6:]) for r in rows] for rows in dict_batches]

    def per_row(rows_of: list[list[Any]]) -> list[list[bytes | None]]:
        return [[ours(row) for row in rows] for rows in rows_of]

    def confluent_kafka(rows_of: list[list[Any]]) -> list[list[bytes]]:
        return [[confluent(m, context) for m in messages] for messages in rows_of]

    first = ours.serialize_column(batches[0].column(0)).to_pylist()
    assert per_row(dict_batches[:1])[0] == first, "protobuf's payloads differ from the columnar"
    assert confluent_kafka(message_batches[:1])[0] == first, "confluent-kafka's payloads differ"
    routes: Routes = {
        "columnar": lambda: [ours.serialize_column(b.column(0)) for b in batches],
        "protobuf-per-row (dicts)": lambda: per_row(dict_batches),
        "confluent-kafka ProtobufSerializer": lambda: confluent_kafka(message_batches),
    }
    return routes, sum(len(p) for p in first) / len(first)


def _mock_registry(schema_text: str, kind: str) -> Any:
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry._sync.mock_schema_registry_client import (
        MockSchemaRegistryClient,
    )

    registry = MockSchemaRegistryClient({"url": "mock://bench"})
    schema_id = registry.register_schema("orders-value", Schema(schema_text, kind))
    assert schema_id == SCHEMA_ID, schema_id
    return registry


def _context() -> Any:
    from confluent_kafka.serialization import MessageField, SerializationContext

    return SerializationContext("orders", MessageField.VALUE)


def measure(routes: Routes, repeat: int) -> dict[str, tuple[float, float]]:
    """Each route's best (wall, CPU) seconds, the routes run round-robin ``repeat`` times."""
    best: dict[str, tuple[float, float]] = {}
    for _ in range(repeat):
        for name, route in routes.items():
            wall, cpu = time.perf_counter(), time.process_time()
            route()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            if name not in best or wall < best[name][0]:
                best[name] = (wall, cpu)
    return best


def table(title: str, best: dict[str, tuple[float, float]], rows: int) -> list[str]:
    base = best["columnar"][0]
    lines = [
        title,
        "",
        "| route | rows/s | wall s per 1M rows | CPU s per 1M rows | columnar is x faster |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    per_million = 1_000_000 / rows
    for name, (wall, cpu) in best.items():
        lines.append(
            f"| {name} | {rows / wall:,.0f} | {wall * per_million:.2f} | "
            f"{cpu * per_million:.2f} | {wall / base:.1f} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--format", choices=["avro", "json", "protobuf", "all"], default="all")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    batches = make_batches(args.rows)
    formats = {
        "avro": ("Avro", avro_routes),
        "json": ("JSON Schema", json_routes),
        "protobuf": ("Protobuf", protobuf_routes),
    }
    chosen = list(formats) if args.format == "all" else [args.format]
    lines: list[str] = []
    for key in chosen:
        label, build = formats[key]
        routes, mean_size = build(batches)
        title = (
            f"{label} payloads of {args.rows:,} rows (mean framed payload {mean_size:.0f} B), "
            f"best of {args.repeat}"
        )
        lines += [*table(title, measure(routes, args.repeat), args.rows), ""]
    text = "\n".join(lines).rstrip()
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            f"{text}\n\nMeasured {dt.datetime.now(dt.UTC):%Y-%m-%d} with "
            f"`python benchmarks/bench_formats.py --rows {args.rows}`.\n"
        )


if __name__ == "__main__":
    main()
