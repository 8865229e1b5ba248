"""Capture, replay and the what-if: overhead, speed, fidelity, on Spark clusters."""
