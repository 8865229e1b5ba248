"""Names minikafka gives its built-in plugins where Kafka names a plugin class in a config
(a module of its own, without pydantic, so the command line can name them cheaply)."""

from __future__ import annotations

from typing import Final

#: KIP-714's receiver: Kafka's is a metrics reporter implementing ClientTelemetry, named in
#: ``metric.reporters``; this name there turns ours on.
CLIENT_TELEMETRY_RECEIVER: Final = "minikafka.ClientTelemetryReceiver"
