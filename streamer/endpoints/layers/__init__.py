"""Layers that wrap any endpoint: spooling, dead letters, resilience (fault kinds), waiting."""
