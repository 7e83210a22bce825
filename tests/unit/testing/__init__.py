"""Unit tests of kafka_sink.testing: the harness configuration, prerequisites and the TCP proxy."""
