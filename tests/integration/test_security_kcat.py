"""kcat (librdkafka's command-line client) through every listener kind.

kcat runs as a subprocess with ``-X`` options, as a user would type them, against the
four listeners of ``security_setup.security_overrides``: PLAINTEXT, SSL (client
certificate required), SASL_PLAINTEXT and SASL_SSL, with PLAIN, SCRAM-SHA-256/512 and
OAUTHBEARER (librdkafka's built-in unsecured JWS). Every run is bounded by a timeout and
waits for a state (the record consumed, the process ended), never for a time.

kcat is not on a fresh machine: ``make kcat`` (a prerequisite of ``make test``) installs it
with apt-get when it can; otherwise these tests skip, saying so.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker.app import MiniKafka
from tests.integration.conftest import running_cluster
from tests.integration.security_setup import USERS, Pki, make_pki, security_overrides

KCAT = shutil.which("kcat")
DEADLINE_S = 90  # a loaded machine: generous, and only reached when something is broken

pytestmark = pytest.mark.skipif(
    KCAT is None, reason="kcat is not installed (`make kcat` installs it as root with apt-get)"
)


@dataclass(frozen=True)
class KcatRun:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path)


@pytest.fixture
async def secure(pki: Pki) -> AsyncIterator[MiniKafka]:
    async with running_cluster(**security_overrides(pki)) as app:
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            app.scram_credentials.add_scram(
                f"{mechanism}=[name=alice,password={USERS['alice']}]", lambda n: b"s" * n
            )
        yield app


def kcat_options(pki: Pki, protocol: str, mechanism: str | None, password: str) -> list[str]:
    """The ``-X`` options a kcat user passes for ``protocol`` and ``mechanism``."""
    conf = {"security.protocol": protocol.lower()}
    if protocol in ("SSL", "SASL_SSL"):
        conf["ssl.ca.location"] = str(pki.ca_file)
    if protocol == "SSL":  # the SSL listener requires a client certificate
        conf["ssl.certificate.location"] = str(pki.client_cert_file)
        conf["ssl.key.location"] = str(pki.client_cert_file)
    if mechanism == "OAUTHBEARER":
        conf["sasl.mechanism"] = mechanism
        conf["enable.sasl.oauthbearer.unsecure.jwt"] = "true"
        conf["sasl.oauthbearer.config"] = "principal=alice"
    elif mechanism is not None:
        conf.update({"sasl.mechanism": mechanism, "sasl.username": "alice"})
        conf["sasl.password"] = password
    return [arg for key, value in conf.items() for arg in ("-X", f"{key}={value}")]


async def kcat(*args: str, stdin: bytes = b"") -> KcatRun:
    """Run kcat to its end (killed at the deadline: a hang fails the test, it never waits)."""
    assert KCAT is not None
    proc = await asyncio.create_subprocess_exec(
        KCAT,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin), DEADLINE_S)
    except TimeoutError:
        proc.kill()
        out, err = await proc.communicate()
        raise AssertionError(f"kcat {args} did not end: {err.decode(errors='replace')}") from None
    assert proc.returncode is not None
    return KcatRun(proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"))


@pytest.mark.parametrize(
    ("protocol", "mechanism"),
    [
        ("PLAINTEXT", None),
        ("SSL", None),
        ("SASL_PLAINTEXT", "PLAIN"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
        ("SASL_PLAINTEXT", "OAUTHBEARER"),
        ("SASL_SSL", "PLAIN"),
        ("SASL_SSL", "SCRAM-SHA-256"),
        ("SASL_SSL", "SCRAM-SHA-512"),
        ("SASL_SSL", "OAUTHBEARER"),
    ],
)
async def test_kcat_produces_and_consumes(
    secure: MiniKafka, pki: Pki, protocol: str, mechanism: str | None
) -> None:
    bootstrap = secure.listener_bootstrap(protocol)
    options = kcat_options(pki, protocol, mechanism, USERS["alice"])
    topic = f"kcat-{protocol}-{mechanism or 'none'}".lower()
    values = [f"kcat {protocol} {mechanism} {i}" for i in range(3)]
    produced = await kcat(
        "-P", "-b", bootstrap, "-t", topic, "-p", "0", *options,
        stdin="".join(f"{value}\n" for value in values).encode(),
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    consumed = await kcat(
        "-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o", "beginning",
        "-c", str(len(values)), "-f", "%s\n", *options,
    )  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == values


@pytest.mark.parametrize(
    ("mechanism", "message"),
    [
        # Kafka's PlainSaslServer says why; a SCRAM failure is only "invalid credentials"
        ("PLAIN", "Authentication failed: Invalid username or password"),
        (
            "SCRAM-SHA-512",
            "Authentication failed during authentication due to invalid credentials with "
            "SASL mechanism SCRAM-SHA-512",
        ),
    ],
)
async def test_kcat_wrong_password_is_refused(
    secure: MiniKafka, pki: Pki, mechanism: str, message: str
) -> None:
    """The broker's refusal ends kcat (its only broker is down): Kafka's message, no record."""
    run = await kcat(
        "-P", "-b", secure.listener_bootstrap("SASL_SSL"), "-t", "kcat-refused", "-p", "0",
        *kcat_options(pki, "SASL_SSL", mechanism, "wrong-password"),
        stdin=b"never stored\n",
    )  # fmt: skip
    assert run.returncode != 0
    assert f"SASL authentication error: {message}" in run.stderr, run.stderr
    assert "kcat-refused" not in secure.cluster.topics
