"""Helpers shared by unit and integration tests (servers the tests run in-process)."""
