"""A virtual-time runtime for asyncio code: no broker in it, as ``purgatory/`` has none.

``loop`` is an asyncio event loop whose time is virtual and which jumps to its next timer
when nothing is runnable; ``network`` is the in-memory network behind its ``create_server``
and ``create_connection``; ``determinism`` pins the process-wide sources of nondeterminism
(time, random, uuid) while a simulation runs. Code that runs on asyncio and reads time from
its loop (the broker, aiokafka, the project's own client) runs on them unchanged.
"""
