"""A sealed batch knows its size before compression and its largest record (the producer's
compression-rate and record-size metrics), the same on the per-record and the columnar paths."""

from __future__ import annotations

import pyarrow as pa
import pytest

from kafka_sink.records.batch import RecordBatchBuilder, SealedBatch
from kafka_sink.records.columnar import seal_columns
from kafka_sink.records.compression import CompressionType

VALUES = [b"x" * 10, b"y" * 300, None, b"z" * 40]
KEYS = [b"k1", None, b"key-3", b"k4"]


def _built(compression: CompressionType) -> SealedBatch:
    builder = RecordBatchBuilder(compression_type=compression, batch_size=1 << 20)
    for key, value in zip(KEYS, VALUES, strict=True):
        builder.append(1000, key, value)
    return builder.seal()


@pytest.mark.parametrize("compression", [CompressionType.NONE, CompressionType.GZIP])
def test_both_paths_agree_on_the_uncompressed_size_and_largest_record(
    compression: CompressionType,
) -> None:
    built = _built(compression)
    (sealed,) = seal_columns(
        pa.array(VALUES, pa.binary()),
        pa.array(KEYS, pa.binary()),
        timestamps_ms=1000,
        compression_type=compression,
        batch_size=1 << 20,
    )
    plain = _built(CompressionType.NONE)
    for batch in (built, sealed):
        # Uncompressed: the batch as it would be without compression, byte for byte.
        assert batch.uncompressed_size_bytes == plain.size_bytes
        # The 300-byte value's record: 300 bytes, its varint length (2), key length (1, null),
        # attributes, timestamp and offset deltas (3), and the empty header count (1), plus the
        # record's own length varint (2).
        assert batch.max_record_size == 309
    if compression is CompressionType.NONE:
        assert built.size_bytes == built.uncompressed_size_bytes
