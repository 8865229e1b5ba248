"""Hostile clients against the TLS and SASL listeners: how fast others are served, memory.

One broker process (``python -m minikafka serve``) with three listeners: PLAINTEXT, SSL and
SASL_PLAINTEXT (PLAIN with a JAAS user, SCRAM-SHA-256 seeded with ``--add-scram``;
throwaway certificates from trustme). A probe client sends ApiVersions every 20 ms on
its own PLAINTEXT connection and records each round trip. The phases, one after the
other, each ``--seconds`` long:

* ``baseline``: nothing but the probe;
* ``tls-stall-N #W``: ``--stalls`` connections to the SSL listener that each send a real
  TLS ClientHello and then never answer the broker's ServerHello, held for the phase;
  ``--waves`` times (``#1``, ``#2``...) to see whether memory is reused or climbs;
* ``sasl-garbage``: ``--workers`` clients in a loop: connect to SASL_PLAINTEXT,
  SaslHandshake (SCRAM-SHA-256 or PLAIN, alternately), then a SaslAuthenticate whose
  token is random bytes; the broker answers an error and closes, and the next begins;
* ``wrong-passwords``: the same loop with a well-formed PLAIN token and a wrong password.

Printed per phase: what the hostile side got (attempts, answers), the probe's p50/p99/max
round trip and failures, the broker's RSS (from ``/proc/<pid>/status``: at the start,
the peak during, and one second after the hostile side stopped), and the ``Traceback``
lines in the broker's log. Figures, no assertions::

    .venv/bin/python -m bench.security.security_hostile_bench [--seconds 10] [--stalls 1000]
        [--workers 8] [--waves 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import ssl
import struct
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trustme

from bench.lib.rss import rss_mb
from bench.lib.stats import percentile
from protocol.builders import request_builder
from protocol.client import ClientConnection
from protocol.codec import decode_response, encode_request
from testkit.broker_process import BrokerProcess

HANDSHAKE, AUTHENTICATE, API_VERSIONS = 17, 36, 18
USER, PASSWORD = "alice", "alice-secret"


@dataclass(frozen=True)
class Listeners:
    host: str
    ssl_port: int
    sasl_port: int
    ca_file: Path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def broker_args(directory: Path) -> tuple[list[str], Listeners]:
    """The broker's command line: its listeners, the certificates, the users."""
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    server = ca.issue_cert("localhost", "127.0.0.1")
    server.private_key_and_cert_chain_pem.write_to_path(str(directory / "server.pem"))
    listeners = Listeners("127.0.0.1", _free_port(), _free_port(), directory / "ca.pem")
    module = "org.apache.kafka.common.security.plain.PlainLoginModule"
    jaas = f'{module} required user_{USER}="{PASSWORD}";'
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{listeners.ssl_port},"
        f"SASL_PLAINTEXT://127.0.0.1:{listeners.sasl_port}",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(directory / "server.pem"),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
    }
    args = [arg for key, value in overrides.items() for arg in ("--override", f"{key}={value}")]
    args += ["--add-scram", f"SCRAM-SHA-256=[name={USER},password={PASSWORD}]"]
    return args, listeners


class Probe:
    """An ApiVersions round trip every 20 ms on one PLAINTEXT connection, timed.

    Stopped by a flag, not by cancelling: on Python 3.11, ``asyncio.wait_for`` swallows a
    cancellation that arrives as its read completes, and a cancelled probe ran on forever.
    """

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.rtts: list[float] = []
        self.failures = 0
        self._stopping = False
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        reader, writer = await asyncio.open_connection(self.host, self.port)
        client = ClientConnection("probe")
        body = request_builder(API_VERSIONS, 3).ApiVersionsRequest(
            client_software_name="probe", client_software_version="1"
        )
        try:
            while not self._stopping:
                start = time.perf_counter()
                writer.write(client.send(API_VERSIONS, 3, body).data)
                got: list[Any] = []
                while not got:
                    got = client.receive(await asyncio.wait_for(reader.read(65536), 10))
                self.rtts.append((time.perf_counter() - start) * 1000)
                await asyncio.sleep(0.02)
        except (TimeoutError, ConnectionError):
            self.failures += 1
        finally:
            writer.close()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        self._stopping = True
        if self._task is not None:
            await self._task


# -- the hostile side ------------------------------------------------------------------


def _client_hello(ca_file: Path) -> bytes:
    """The first flight of a real TLS client: what a stalled handshake sends."""
    context = ssl.create_default_context(cafile=str(ca_file))
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with contextlib.suppress(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


async def tls_stalls(listeners: Listeners, seconds: float, count: int) -> str:
    hello = _client_hello(listeners.ca_file)
    writers: list[asyncio.StreamWriter] = []
    refused = 0
    for _ in range(count):
        try:
            _reader, writer = await asyncio.open_connection(listeners.host, listeners.ssl_port)
        except OSError:
            refused += 1
            continue
        writer.write(hello)
        writers.append(writer)
    await asyncio.sleep(seconds)
    open_now = sum(1 for w in writers if not w.transport.is_closing())
    for writer in writers:
        writer.close()
    return f"{len(writers)} stalled ({refused} refused), {open_now} still open at the end"


async def _sasl_attempt(listeners: Listeners, mechanism: str, token: bytes) -> str:
    """One login: SaslHandshake v1, SaslAuthenticate v2 with ``token``; the outcome."""
    reader, writer = await asyncio.open_connection(listeners.host, listeners.sasl_port)
    try:
        shake = request_builder(HANDSHAKE, 1).SaslHandshakeRequest(mechanism=mechanism)
        answer = await _call(reader, writer, HANDSHAKE, 1, 1, shake)
        if answer is None or answer.error_code != 0:
            return "handshake refused"
        auth = request_builder(AUTHENTICATE, 2).SaslAuthenticateRequest(auth_bytes=token)
        answer = await _call(reader, writer, AUTHENTICATE, 2, 2, auth)
        return "closed" if answer is None else str(answer.error_code.name)
    finally:
        writer.close()


async def _call(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    api_key: int,
    version: int,
    correlation_id: int,
    body: Any,
) -> Any:
    writer.write(encode_request(api_key, version, correlation_id, "hostile", body))
    try:
        async with asyncio.timeout(30):
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            frame = await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    return decode_response(api_key, version, frame)[1]


TokenMaker = Callable[[int], tuple[str, bytes]]


def garbage_token(i: int) -> tuple[str, bytes]:
    return ("SCRAM-SHA-256" if i % 2 else "PLAIN"), os.urandom(64 + i % 512)


def wrong_password_token(i: int) -> tuple[str, bytes]:
    return "PLAIN", f"\0{USER}\0wrong-{i}".encode()


async def login_loop(listeners: Listeners, seconds: float, workers: int, make: TokenMaker) -> str:
    outcomes: Counter[str] = Counter()
    end = time.monotonic() + seconds

    async def worker(w: int) -> None:
        i = w
        while time.monotonic() < end:
            mechanism, token = make(i)
            try:
                outcomes[await _sasl_attempt(listeners, mechanism, token)] += 1
            except Exception as exc:  # a hostile run counts what it got
                outcomes[type(exc).__name__] += 1
            i += workers

    await asyncio.gather(*(worker(w) for w in range(workers)))
    total = sum(outcomes.values())
    return f"{total} logins: " + ", ".join(f"{k} {v}" for k, v in outcomes.most_common())


# -- the phases ------------------------------------------------------------------------


Phase = Callable[[Listeners, argparse.Namespace], Coroutine[Any, Any, str]]


async def baseline(listeners: Listeners, args: argparse.Namespace) -> str:
    await asyncio.sleep(args.seconds)
    return "-"


def phases(args: argparse.Namespace) -> dict[str, Phase]:
    def stall(ls: Listeners, a: argparse.Namespace) -> Coroutine[Any, Any, str]:
        return tls_stalls(ls, a.seconds, a.stalls)

    # several waves: does the next wave reuse the memory of the last, or climb by as much?
    waves = {f"tls-stall-{args.stalls} #{wave + 1}": stall for wave in range(args.waves)}
    return {
        "baseline": baseline,
        **waves,
        "sasl-garbage": lambda ls, a: login_loop(ls, a.seconds, a.workers, garbage_token),
        "wrong-passwords": lambda ls, a: login_loop(ls, a.seconds, a.workers, wrong_password_token),
    }


def _or_nan(value: float | None) -> float:
    return float("nan") if value is None else value


async def run_phase(
    name: str, phase: Phase, broker: BrokerProcess, listeners: Listeners, args: Any
) -> None:
    pid = broker.proc.pid
    host, port = broker.bootstrap.split(":")
    start_rss = peak = rss_mb(pid) or 0.0
    probe = Probe(host, int(port))
    probe.start()
    task = asyncio.get_running_loop().create_task(phase(listeners, args))
    while not task.done():
        peak = max(peak, (rss_mb(pid) or 0.0))
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.0)
    after = rss_mb(pid) or 0.0
    await probe.stop()
    rtts = sorted(probe.rtts)
    print(
        f"{name:<19} {task.result():<58} {len(rtts):>6} {_or_nan(percentile(rtts, 50)):>7.2f} "
        f"{_or_nan(percentile(rtts, 99)):>7.2f} {rtts[-1] if rtts else float('nan'):>8.2f} "
        f"{probe.failures:>5} {start_rss:>7.0f} {peak:>7.0f} {after:>7.0f}",
        flush=True,
    )


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        extra, listeners = broker_args(Path(tmp))
        log = Path(tmp) / "broker.log"
        with log.open("w") as stderr:
            broker = BrokerProcess(extra, stderr=stderr, log_level="WARNING")
        try:
            print(
                f"{'phase':<19} {'hostile side':<58} {'probes':>6} {'p50 ms':>7} "
                f"{'p99 ms':>7} {'max ms':>8} {'fails':>5} {'RSS MB':>7} {'peak':>7} "
                f"{'after':>7}"
            )
            for name, phase in phases(args).items():
                await run_phase(name, phase, broker, listeners, args)
        finally:
            broker.stop()
        print(f"broker log: {log.read_text(errors='replace').count('Traceback')} tracebacks")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="each phase's length")
    parser.add_argument("--stalls", type=int, default=1000, help="stalled TLS handshakes")
    parser.add_argument("--workers", type=int, default=8, help="concurrent hostile logins")
    parser.add_argument("--waves", type=int, default=3, help="tls-stall phases, one by one")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
