"""What client telemetry (KIP-714) costs the broker per push."""
