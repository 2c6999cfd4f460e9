"""Benchmarks and evaluations of context-broker; run from the repository root."""
