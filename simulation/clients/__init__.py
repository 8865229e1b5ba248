"""Simulated clients of the workload that are not aiokafka's: one module per client."""
