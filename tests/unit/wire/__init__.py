"""Unit tests of kafka_sink.wire: framing, primitives, schemas and every message version."""
