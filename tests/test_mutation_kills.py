"""Tests written to kill mutants that benchmarks/mutation.py found surviving (docs/MUTATION.md)."""
