"""Unit tests of kafka_sink.admin against a scripted cluster."""
