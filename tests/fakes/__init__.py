"""Fakes, builders and clients the tests share: brokers without sockets, responses as data."""
