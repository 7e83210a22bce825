"""The commit log: one JSON document per driver commit or abort, and where it is stored.

Modules: ``document`` (commit messages from tasks, gathering them into per-partition ranges,
the documents and their log line) and ``store`` (a local directory, or S3, GCS, Azure, HDFS
through ``pyarrow.fs``).

Invariants: a document appears whole or not at all; only the driver writes documents.
"""
