"""``minikafka serve --security MODE``: a secure listener beside the PLAINTEXT one, ready to use.

For a developer who wants the production code path (``security_protocol="SASL_SSL"``, a
mechanism, a user, a CA file) against a local broker: a throwaway CA and broker
certificate made with trustme (valid for ``localhost``, ``127.0.0.1`` and the listen host),
the listener configs under Kafka's names, one user (``minikafka`` with a generated
password, or the one given) known to PLAIN (the listener's JAAS users) and to
SCRAM-SHA-256/512 (seeded as ``kafka-storage format --add-scram`` would), OAUTHBEARER's
unsecured tokens, and a Kafka ``client.properties`` written beside the PEM files. Modes:
``sasl_ssl``, ``sasl_plaintext``, ``ssl`` (client certificates required: a client
certificate, ``CN=minikafka-client``, is written too).

The secure listener's port: 0 (free) when ``--port 0``, else the port after the
brokers' PLAINTEXT ports (``--port 9092``: PLAINTEXT 9092, SASL_SSL 9093 for one broker).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

MODES = {"sasl_ssl": "SASL_SSL", "sasl_plaintext": "SASL_PLAINTEXT", "ssl": "SSL"}
USER = "minikafka"
CLIENT_MECHANISM = "SCRAM-SHA-512"
MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass(frozen=True)
class ClientSettings:
    """What a client needs to connect to the secure listener (Kafka's client names)."""

    security_protocol: str
    bootstrap_servers: str = ""
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    ca_file: Path | None = None
    client_cert_file: Path | None = None  # SSL mode: key + certificate, PEM
    properties_file: Path | None = None

    def properties(self) -> str:
        """A Kafka ``client.properties`` (``--command-config`` of Kafka's tools)."""
        lines = [f"security.protocol={self.security_protocol}"]
        if self.bootstrap_servers:
            lines.insert(0, f"bootstrap.servers={self.bootstrap_servers}")
        if self.sasl_mechanism is not None:
            lines.append(f"sasl.mechanism={self.sasl_mechanism}")
            lines.append(
                f'sasl.jaas.config={SCRAM_MODULE} required username="{self.username}" '
                f'password="{self.password}";'
            )
        if self.ca_file is not None:
            lines += ["ssl.truststore.type=PEM", f"ssl.truststore.location={self.ca_file}"]
        if self.client_cert_file is not None:
            lines += ["ssl.keystore.type=PEM", f"ssl.keystore.location={self.client_cert_file}"]
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class SecuritySetup:
    """The configs, the credentials to seed, and the client's settings of one mode."""

    listener_name: str
    overrides: dict[str, str]
    scram_seeds: tuple[str, ...]
    client: ClientSettings


def security_setup(
    mode: str, directory: Path, host: str, port: int, brokers: int, password: str
) -> SecuritySetup:
    """Write the CA, the broker (and client) certificates under ``directory``."""
    import trustme  # only when asked: the command line's other tools start without it

    protocol = MODES[mode]
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="minikafka throwaway CA")
    identities = ["localhost", "127.0.0.1"]
    if host not in identities and host not in ("0.0.0.0", "::", ""):
        identities.append(host)
    ca_file, server_file = directory / "ca.pem", directory / "server.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    ca.issue_cert(*identities).private_key_and_cert_chain_pem.write_to_path(str(server_file))
    secure_port = 0 if port == 0 else port + brokers
    overrides = {
        "listeners": f"PLAINTEXT://{host}:{port},{protocol}://{host}:{secure_port}",
        "sasl.enabled.mechanisms": MECHANISMS,
        f"listener.name.{protocol.lower()}.plain.sasl.jaas.config": (
            f'{PLAIN_MODULE} required user_{USER}="{password}";'
        ),
    }
    client_cert = None
    if protocol != "SASL_PLAINTEXT":
        overrides.update(
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(server_file),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(ca_file),
            }
        )
    if protocol == "SSL":
        overrides["ssl.client.auth"] = "required"
        client_cert = directory / "client.pem"
        leaf = ca.issue_cert(f"{USER}@localhost", common_name="minikafka-client")
        leaf.private_key_and_cert_chain_pem.write_to_path(str(client_cert))
    sasl = protocol.startswith("SASL_")
    client = ClientSettings(
        security_protocol=protocol,
        sasl_mechanism=CLIENT_MECHANISM if sasl else None,
        username=USER if sasl else None,
        password=password if sasl else None,
        ca_file=ca_file if protocol != "SASL_PLAINTEXT" else None,
        client_cert_file=client_cert,
        properties_file=directory / "client.properties",
    )
    seeds = tuple(
        f"{mechanism}=[name={USER},password={password}]"
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512")
    )
    return SecuritySetup(protocol, overrides, seeds, client)
