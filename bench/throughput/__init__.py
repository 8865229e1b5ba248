"""Produce, consume and delivery latency with real clients: plain, transactional, share."""
