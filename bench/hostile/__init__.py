"""Hostile clients and fuzzed frames against a broker process: memory, others' latency."""
