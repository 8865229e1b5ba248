"""Deterministic simulation: brokers and their clients on a seeded virtual clock.

`loop.py` is an asyncio event loop whose time is virtual and which jumps to its next timer
when nothing is runnable; `network.py` is the in-memory network behind its `create_server`
and `create_connection`. Code that runs on asyncio and reads time from its loop (the broker,
aiokafka, the project's own client) runs on them unchanged.
"""
