"""Record layer: Kafka RecordBatch v2 bytes, pure (no sockets, threads or clocks).

Modules:

* ``arrow``: ``as_binary_array``, the one normaliser of key and value columns (string, binary,
  their large, view, dictionary and null forms, chunked arrays, Python sequences) to Arrow
  binary, and numpy views of Arrow buffers (offsets, ints, validity) without pandas.
* ``batch``: RecordBatchBuilder (per-record appends, the producer's ``send()`` path),
  SealedBatch (records compressed once; ``encode`` stamps producer id/epoch/sequence and the
  CRC), ``estimate_record_size``, ``as_bytes`` (what a key, value or header value becomes),
  ``read_batches`` (decoder that verifies CRCs) and ``decode_batch`` (one batch, within a
  decoding limit).
* ``columnar``: ``seal_columns``, the bulk path that encodes whole Arrow columns with numpy and
  pyarrow; its uncompressed output equals the builder's byte for byte.
* ``compression``: the codecs in the framings Kafka expects (gzip member, xerial snappy, LZ4
  frame with independent blocks, zstd frame) and Kafka's ``compression.<codec>.level`` ranges.
* ``crc``: CRC-32C.
* ``fetched``: ``fetched_records``, the data records a consumer sees in one Fetch response
  partition (truncated tail, control batches and, under read_committed, aborted transactions
  left out) and the offset to fetch next, decoding at most ``MAX_DECODED_BYTES`` (64 MiB) per
  answer.
* ``murmur2``: Java's key hash and partition choice (no numpy); ``murmur2_columns``: the same
  vectorised over a key column.

Nothing is re-exported here, so importing the builder does not import pyarrow.
"""
