"""Fakes and builders shared by the test modules (import them from here, not from other tests)."""
