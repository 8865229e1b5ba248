"""The replay's target cluster: where its brokers are, what config they run, and -- for
``minikafka replay --target-brokers N`` -- starting and stopping it.

The driver looks at the target twice, over Kafka's protocol like any client: Metadata
(broker id -> address, where each captured broker's connections go) and DescribeConfigs
of each broker (the configs that are not Kafka's defaults: the label a what-if variant
carries on the report). Both work against any Kafka-compatible target.

``TargetCluster`` runs ``python -m minikafka serve --port 0 --brokers N`` in a child process
(spark_jobs never imports the broker: the command line is the interface), with the
given ``--override``s and, so that the report can show the replayed side's purgatory
outcomes and Kafka's breakdown, ``--capture-dir``. It waits for the ready line, and
stops the cluster with SIGTERM, which closes its capture files.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from protocol.builders import request_builder
from protocol.client import ClientConnection, Response
from protocol.errors import ProtocolError

__all__ = [
    "TargetCluster",
    "TargetConfig",
    "TargetError",
    "describe_broker_configs",
    "fetch_broker_addresses",
    "parse_override",
]

_READ_SIZE: Final = 1 << 16
_METADATA: Final = 3
_METADATA_VERSION: Final = 4
_DESCRIBE_CONFIGS: Final = 32
_DESCRIBE_CONFIGS_VERSION: Final = 1
_BROKER_RESOURCE: Final = 4
_DEFAULT_CONFIG_SOURCE: Final = 5
#: Configs that differ per run whatever the variant (where it listens, its id, its
#: directories): left out of the label.
_NOT_A_VARIANT: Final = frozenset(
    {
        "broker.id",
        "node.id",
        "process.roles",
        "listeners",
        "advertised.listeners",
        "log.dirs",
        "log.dir",
    }
)


class TargetError(RuntimeError):
    """The target cluster could not be reached, started or asked."""


def _exchange(
    address: tuple[str, int], api_key: int, version: int, body: Any, timeout_s: float
) -> Any:
    client = ClientConnection("minikafka-replay")
    outgoing = client.send(api_key, version, body)
    with socket.create_connection(address, timeout=timeout_s) as sock:
        sock.sendall(outgoing.data)
        return _receive_one(sock, client).body


def _receive_one(sock: socket.socket, client: ClientConnection) -> Response:
    """Read until ``client`` has the answer to its one request in flight."""
    while True:
        data = sock.recv(_READ_SIZE)
        if not data:
            raise ConnectionError("connection closed mid-response")
        responses = client.receive(data)
        if responses:
            return responses[0]


def _servers(bootstrap: str) -> list[tuple[str, int]]:
    out = []
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        out.append((host, int(port)))
    return out


def fetch_broker_addresses(bootstrap: str, timeout_s: float = 10.0) -> dict[int, tuple[str, int]]:
    """Broker id -> (host, port) from a Metadata request to the first reachable
    bootstrap server."""
    request = request_builder(_METADATA, _METADATA_VERSION).MetadataRequest(
        topics=(), allow_auto_topic_creation=False
    )
    errors: list[str] = []
    for address in _servers(bootstrap):
        try:
            body = _exchange(address, _METADATA, _METADATA_VERSION, request, timeout_s)
        except (OSError, ValueError, ProtocolError) as exc:
            errors.append(f"{address[0]}:{address[1]}: {exc}")
            continue
        brokers: Any = getattr(body, "brokers", ())
        return {int(b.node_id): (str(b.host), int(b.port)) for b in brokers}
    raise ConnectionError(f"no bootstrap server answered Metadata: {'; '.join(errors)}")


def listener_addresses(
    bootstrap: str, other_bootstrap: str, addresses: Mapping[int, tuple[str, int]]
) -> dict[int, tuple[str, int]]:
    """Broker id -> its address on another listener, from two bootstrap lists that name
    the brokers in the same order (``serve``'s ready line: ``bootstrap=`` and the secure
    listener's) and the ids Metadata gave for the first."""
    position = {address: i for i, address in enumerate(_servers(bootstrap))}
    other = _servers(other_bootstrap)
    return {
        broker_id: other[position[address]]
        for broker_id, address in addresses.items()
        if address in position and position[address] < len(other)
    }


@dataclass(frozen=True)
class TargetConfig:
    """What the target's brokers run with: every config's value (a value that differs
    between brokers as ``"v0 | v1"``) and the names of those that are not Kafka's
    defaults -- the label of a what-if variant."""

    values: dict[str, str] = field(default_factory=dict)
    non_default: tuple[str, ...] = ()

    def overrides(self) -> dict[str, str]:
        return {name: self.values[name] for name in self.non_default}


def describe_broker_configs(
    addresses: dict[int, tuple[str, int]], timeout_s: float = 10.0
) -> TargetConfig:
    """Ask each broker for its configs (DescribeConfigs, BROKER resource). Empty when
    the target cannot say."""
    b = request_builder(_DESCRIBE_CONFIGS, _DESCRIBE_CONFIGS_VERSION)
    per_broker: dict[str, dict[int, str]] = {}
    non_default: set[str] = set()
    for broker_id, address in sorted(addresses.items()):
        resource = b.DescribeConfigsResource(
            resource_type=_BROKER_RESOURCE, resource_name=str(broker_id), configuration_keys=None
        )
        request = b.DescribeConfigsRequest(resources=(resource,), include_synonyms=True)
        try:
            body = _exchange(
                address, _DESCRIBE_CONFIGS, _DESCRIBE_CONFIGS_VERSION, request, timeout_s
            )
        except (OSError, ValueError, ProtocolError):
            continue
        for result in getattr(body, "results", ()):
            if int(result.error_code) != 0:
                continue
            for entry in result.configs:
                if entry.value is None or getattr(entry, "is_sensitive", False):
                    continue
                name = str(entry.name)
                per_broker.setdefault(name, {})[broker_id] = str(entry.value)
                if name not in _NOT_A_VARIANT and not _at_default(entry):
                    non_default.add(name)
    values = {
        name: " | ".join(dict.fromkeys(by_broker.values()))
        for name, by_broker in sorted(per_broker.items())
    }
    return TargetConfig(values, tuple(sorted(non_default)))


def _at_default(entry: Any) -> bool:
    """A config at Kafka's default: its source is the default, or it is set (as Kafka 4.1+
    sets the cluster-level ``min.insync.replicas`` for eligible leader replicas) to the
    value of its default synonym -- not a variant either way."""
    source = int(getattr(entry, "config_source", _DEFAULT_CONFIG_SOURCE))
    if source == _DEFAULT_CONFIG_SOURCE:
        return True
    defaults = [
        s.value for s in getattr(entry, "synonyms", ()) if int(s.source) == _DEFAULT_CONFIG_SOURCE
    ]
    return bool(defaults) and defaults[0] == entry.value


def parse_override(text: str) -> tuple[str, str]:
    """``key=value`` -> (key, value); ValueError naming the text otherwise."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"not KEY=VALUE: {text!r}")
    return key.strip(), value.strip()


class TargetCluster:
    """A minikafka cluster in a child process, started for one replay (see module doc)."""

    def __init__(
        self,
        brokers: int,
        overrides: Sequence[str] = (),
        *,
        capture_dir: Path | None = None,
        log_path: Path | None = None,
        host: str = "127.0.0.1",
        data_dir: Path | None = None,
        users: Mapping[str, str] | None = None,
        security_dir: Path | None = None,
    ) -> None:
        if brokers < 1:
            raise ValueError(f"a target cluster needs at least one broker, not {brokers}")
        for override in overrides:
            parse_override(override)
        self.brokers = brokers
        self.overrides = list(overrides)
        self.capture_dir = capture_dir
        self.data_dir = data_dir
        self.users = dict(users or {})
        self.security_dir = security_dir
        #: The SASL_PLAINTEXT listener's ``host:port,...`` (with ``users``), once started.
        self.sasl_bootstrap: str | None = None
        self.log_path = log_path
        self.host = host
        self.bootstrap: str | None = None
        self._proc: subprocess.Popen[str] | None = None
        self._log: IO[str] | None = None

    def command(self) -> list[str]:
        argv = [sys.executable, "-m", "minikafka", "--log-level", "WARNING", "serve"]
        argv += ["--brokers", str(self.brokers), "--host", self.host, "--port", "0"]
        if self.capture_dir is not None:
            argv += ["--capture-dir", str(self.capture_dir)]
        if self.data_dir is not None:  # holds client-quotas.json with --target-quotas
            argv += ["--data-dir", str(self.data_dir)]
        for override in self.overrides:
            argv += ["--override", override]
        if self.users:
            argv += self._sasl_args()
        return argv

    def _sasl_args(self) -> list[str]:
        """A SASL_PLAINTEXT listener (``serve --security sasl_plaintext``) whose PLAIN
        users and SCRAM credentials are ``users``: what ``--target-users`` replays over."""
        plain = " ".join(f'user_{name}="{password}"' for name, password in self.users.items())
        jaas = f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain};"
        argv = ["--security", "sasl_plaintext"]
        argv += ["--override", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas}"]
        if self.security_dir is not None:
            argv += ["--security-dir", str(self.security_dir)]
        for name, password in self.users.items():
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                argv += ["--add-scram", f"{mechanism}=[name={name},password={password}]"]
        return argv

    def start(self, timeout_s: float = 60.0) -> str:
        """Start it and return its bootstrap once every listener is up."""
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = open(self.log_path, "w", encoding="utf-8")  # noqa: SIM115
        proc = self._proc = subprocess.Popen(
            self.command(),
            stdout=subprocess.PIPE,
            stderr=self._log if self._log is not None else subprocess.DEVNULL,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        line: list[str] = []
        reader = threading.Thread(
            target=lambda: line.append(proc.stdout.readline() if proc.stdout else ""),
            daemon=True,
        )
        reader.start()
        reader.join(timeout_s)
        ready = line[0] if line else ""
        if "bootstrap=" not in ready:
            code = proc.poll()
            self.stop()
            where = f"; see {self.log_path}" if self.log_path is not None else ""
            state = f"exit code {code}" if code is not None else f"no ready line in {timeout_s:g} s"
            raise TargetError(f"the target cluster did not start ({state}){where}")
        self.bootstrap = ready.split("bootstrap=", 1)[1].split()[0]
        if " SASL_PLAINTEXT=" in ready:
            self.sasl_bootstrap = ready.split(" SASL_PLAINTEXT=", 1)[1].split()[0]
        return self.bootstrap

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM (the broker closes its capture files), SIGKILL after ``timeout_s``."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc is not None and proc.stdout is not None:
            proc.stdout.close()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> TargetCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
