"""The project's one asyncio Kafka client shell (issue 23): `client_io.shell.ClientShell`.

A package of its own so that ``broker/`` (followers, marker sender, command line tools) and
``spark_jobs/`` (replay, workload) can both use it; it imports only ``protocol`` (an
import-linter contract in ``pyproject.toml`` says so).
"""

from client_io.shell import ClientShell, PeerClosed, ResponseHandler

__all__ = ["ClientShell", "PeerClosed", "ResponseHandler"]
