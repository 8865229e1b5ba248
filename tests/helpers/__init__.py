"""Helpers shared by test modules (test modules never import each other); what the
benchmarks use too is in the top-level ``testkit`` package."""
