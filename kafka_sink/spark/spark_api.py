"""What the running PySpark offers the sink's writers, found by looking, never by version.

Role: pykafka runs on PySpark 4.0 to 4.3. The one difference its writers meet is how a streaming
task's rows arrive:

- PySpark 4.1 and later have ``DataSourceStreamArrowWriter``: a stream writer of that class is
  handed Arrow record batches.
- PySpark 4.0 has no such class, but its write function (``write_into_data_source.py``) hands
  Arrow record batches to any writer, streaming or not, that is a ``DataSourceArrowWriter``, and
  ``Row`` s to any other. So on 4.0 the stream writer is a ``DataSourceStreamWriter`` and a
  ``DataSourceArrowWriter`` at once (:class:`StreamWriterBase`).

Should a PySpark hand the stream writer ``Row`` s after all, ``executor/rows.py`` turns them into
Arrow record batches in bulk before the write loop sees them: the same loop runs either way.

Invariants:
- Feature detection only (``hasattr`` on ``pyspark.sql.datasource``); nothing reads a version
  string.
- :class:`StreamWriterBase` is a subclass of ``DataSourceStreamWriter`` on every PySpark, so
  Spark's own type checks of a stream writer pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import datasource as _datasource

__all__ = ["ARROW_STREAM_WRITER", "StreamWriterBase"]

#: Whether this PySpark has a streaming Arrow writer class of its own (4.1 and later).
ARROW_STREAM_WRITER: bool = hasattr(_datasource, "DataSourceStreamArrowWriter")

if TYPE_CHECKING:
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as StreamWriterBase
elif ARROW_STREAM_WRITER:
    StreamWriterBase = _datasource.DataSourceStreamArrowWriter
else:

    class StreamWriterBase(_datasource.DataSourceStreamWriter, _datasource.DataSourceArrowWriter):
        """PySpark 4.0: a stream writer that its write function hands Arrow record batches."""
