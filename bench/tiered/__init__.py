"""Tiered storage (KIP-405): remote fetches beside local ones, and what copying costs."""
