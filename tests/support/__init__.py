"""Helpers shared by the tests: own servers, database and event comparisons, the test oracles."""
