"""``minikafka`` command line: ``serve``, ``fault``, Kafka's tools, and the jobs.

The shape of ``serve`` is relied on by other tools and tests: when every listener is up
it prints exactly one line ``minikafka ready: bootstrap=HOST:PORT[,HOST:PORT...]`` on
stdout (followed by `` control=http://HOST:PORT control_token=TOKEN
console=http://HOST:PORT/console?token=TOKEN`` when ``--control-port`` is given, and
by `` <LISTENER>=HOST:PORT[,...] client_config=PATH`` with ``--security``), then serves
until SIGINT or SIGTERM and exits 0. ``--security sasl_ssl|sasl_plaintext|ssl`` adds a
secure listener with throwaway certificates and a user (``broker/security/quickstart.py``);
``--add-scram 'SCRAM-SHA-256=[name=alice,password=alice-secret]'`` seeds a SCRAM
credential as ``kafka-storage format --add-scram`` does. ``--client-telemetry`` turns on
KIP-714's receiver (``metric.reporters``: Kafka's is a reporter plugin, no plain switch).

Exit codes: 0 done; 1 the command could not be done (a port in use, a cluster that
refuses); 2 a bad argument or config -- with one line on stderr that names it
(``minikafka serve: error: --port 70000 is not a port (0..65535)``), checked before
anything starts: ports and their range, the broker count, ``--data-dir`` and
``--capture-dir`` created and written to, the config's keys and values.

Subcommands: ``serve``; ``fault`` (the control endpoint, ``broker/control/``);
``topics``, ``groups``, ``features``, ``client-metrics``, ``produce``, ``consume`` (Kafka's
command line tools, ``kafka_tools/admin_cli.py``); ``workload``, ``replay``, ``report``,
``compare`` (``spark_jobs``, run in a child process; a missing extra is one line saying
what to install).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import importlib.util
import logging
import os
import secrets
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from broker.config.plugin_names import CLIENT_TELEMETRY_RECEIVER
from broker.control.guard import is_loopback
from broker.control.token_file import TOKEN_ENV, remove_token, write_token
from broker.observability.gc_policy import (
    DEFAULT_GC_THRESHOLDS,
    apply_gc_policy,
    install_gc_log_from_env,
    parse_gc_thresholds,
)
from broker.security.quickstart import SecuritySetup, security_setup
from broker.security.scram_credentials import ScramCredentialStore
from simulation.command import add_simulate_parser

if TYPE_CHECKING:
    from broker.app import MiniKafka
    from broker.config.broker_config import BrokerConfig

log = logging.getLogger("broker.cli")  # the name its log lines have always carried

#: ``--brokers`` above this is refused: each broker is a listener, purgatories with their
#: reapers and a fetcher per leader in one process; beyond a few dozen it only thrashes.
MAX_BROKERS = 64
#: The control endpoint ``make run`` starts, and the default of ``minikafka fault``.
DEFAULT_CONTROL = "http://127.0.0.1:9990"


class UsageError(Exception):
    """A bad argument, found after parsing; exit 2 with ``prog: error: message``."""


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``minikafka serve: error: ...`` (and ``--help``
    for the usage), not the usage block first."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from kafka_tools.admin_cli import add_admin_parsers

    parser = Parser(prog="minikafka", description="A Kafka-compatible mini broker simulator.")
    parser.add_argument("--log-level", default="INFO", help=LOG_LEVEL_HELP)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    serve = sub.add_parser("serve", help="run one or more brokers")
    serve.add_argument(
        "--brokers", type=int, default=1, help=f"brokers in this process, 1..{MAX_BROKERS} (1)"
    )
    serve.add_argument(
        "--host",
        default=None,
        help="listen address (127.0.0.1; a --config file's listeners= gives another)",
    )
    serve.add_argument(
        "--port",
        type=int,
        default=None,
        help="port of broker 0; broker i uses port+i; 0: free ports (9092, or listeners=)",
    )
    serve.add_argument(
        "--advertised-host",
        default=None,
        help="host name Metadata gives clients (default: --host), like Kafka's "
        "advertised.listeners; e.g. a container listening on 0.0.0.0",
    )
    serve.add_argument("--data-dir", type=Path, default=None, help="keep logs here (memory)")
    serve.add_argument(
        "--config",
        type=Path,
        default=None,
        help="a Kafka server.properties; keys minikafka does not model are ignored (logged)",
    )
    serve.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Kafka broker config, e.g. num.partitions=3 (repeatable; unknown keys are errors)",
    )
    _add_security_options(serve)
    _add_control_options(serve)
    _add_capture_options(serve)
    _add_client_telemetry_option(serve)
    _add_gc_options(serve)
    _add_fault_parser(sub)
    add_admin_parsers(sub)
    add_simulate_parser(sub)
    _add_log_level_after_commands(sub)
    _add_spark_job_parsers(sub)
    return parser


LOG_LEVEL_HELP = "Python logging level (INFO)"


def _add_security_options(serve: argparse.ArgumentParser) -> None:
    serve.add_argument(
        "--security",
        choices=("sasl_ssl", "sasl_plaintext", "ssl"),
        default=None,
        help="add a secure listener beside the PLAINTEXT one, with a throwaway CA, a user, "
        "and a client.properties (printed in the ready line)",
    )
    serve.add_argument(
        "--security-dir",
        type=Path,
        default=None,
        help="where --security writes its PEM files and client.properties "
        "(DATA_DIR/security, else a new temporary directory)",
    )
    serve.add_argument(
        "--add-scram",
        action="append",
        default=[],
        metavar="SPEC",
        help="seed a SCRAM credential, kafka-storage's syntax: "
        "'SCRAM-SHA-256=[name=alice,password=alice-secret]' (repeatable)",
    )


def _add_log_level_after_commands(sub: Any) -> None:
    """``--log-level`` after the command too (``minikafka serve --log-level DEBUG``), as
    well as before it (``minikafka --log-level DEBUG serve``). Its default there is
    SUPPRESS: left out after the command, the value given before it (or INFO) stands;
    given in both places, the one after the command wins. The spark jobs are not parsed
    here (``main`` hands their arguments over first); ``workload`` has its own."""
    for command in sub.choices.values():
        command.add_argument("--log-level", default=argparse.SUPPRESS, help=LOG_LEVEL_HELP)


# -- capture, and the client-side jobs of spark_jobs/ (workload, replay, report) -------

#: ``minikafka workload|replay|report ARGS`` run ``python -m spark_jobs.<job> ARGS`` in a
#: child process: the broker package must not import spark_jobs (import-linter
#: contract), and a child keeps the clients (and the JVM) out of this process. Arguments
#: pass through untouched; see ``python -m spark_jobs.<job> --help``.
SPARK_JOBS = {
    "workload": "spark_jobs.workload",
    "replay": "spark_jobs.replay",
    "report": "spark_jobs.report",
    "compare": "spark_jobs.compare",
}
_SPARK_JOB_HELP = {
    "workload": "drive a broker with a realistic client mix (aiokafka)",
    "replay": "replay a capture against a broker (Spark)",
    "report": "latency report of a replay (Spark)",
    "compare": "what-if: replays of one capture side by side (Spark)",
}
#: What each job needs beyond the base install: (module, what to say).
_SPARK_JOB_NEEDS = {
    "workload": ("aiokafka",),
    "replay": ("pyspark", "pyarrow"),
    "report": ("pyspark", "matplotlib", "jinja2"),
    "compare": ("pyspark", "matplotlib", "jinja2"),
}
_JOBS_NEEDING_JAVA = frozenset({"replay", "report", "compare"})
#: The jobs that take ``--log-level``: a ``minikafka --log-level L JOB`` passes it on.
_JOBS_WITH_LOG_LEVEL = frozenset({"workload"})
INSTALL_SPARK_EXTRA = ".venv/bin/pip install -e '.[spark]'"


def _add_capture_options(serve: argparse.ArgumentParser) -> None:
    serve.add_argument(
        "--capture-dir",
        type=Path,
        default=None,
        help="capture every request and delayed-operation event into this directory",
    )


def _add_client_telemetry_option(serve: argparse.ArgumentParser) -> None:
    """KIP-714's receiver: Kafka has no plain switch (a ClientTelemetry reporter plugin
    in ``metric.reporters``), so this adds minikafka's receiver name there."""
    serve.add_argument(
        "--client-telemetry",
        action="store_true",
        help="receive client telemetry (KIP-714: GetTelemetrySubscriptions and "
        "PushTelemetry advertised, pushed metrics at /metrics and in the capture); Kafka "
        f"has no plain config for it: this adds {CLIENT_TELEMETRY_RECEIVER} to "
        "metric.reporters, where Kafka names its telemetry reporter plugin",
    )


def _add_gc_options(serve: argparse.ArgumentParser) -> None:
    """The broker process's collector policy (``broker/observability/gc_policy.py``): Kafka
    runs on the JVM and has no name for it."""

    def thresholds(text: str) -> tuple[int, int, int] | None:
        try:
            return parse_gc_thresholds(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    serve.add_argument(
        "--gc-threshold",
        type=thresholds,
        default=DEFAULT_GC_THRESHOLDS,
        metavar="T0,T1,T2",
        help="the broker process's gc.set_threshold; 'python': the interpreter's "
        "(broker/observability/gc_policy.py says why; "
        f"{','.join(map(str, DEFAULT_GC_THRESHOLDS))})",
    )
    serve.add_argument(
        "--gc-freeze",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="gc.freeze() what start-up imported, so collections no longer walk it (on)",
    )


def _add_spark_job_parsers(sub: Any) -> None:
    for name, module in SPARK_JOBS.items():
        # Listed for --help only: main() hands the arguments over before parsing.
        sub.add_parser(name, help=f"{_SPARK_JOB_HELP[name]}; see python -m {module} --help")


def _spark_job(argv: Sequence[str]) -> tuple[str, list[str]] | None:
    """(job name, its arguments) when ``argv`` names a job of spark_jobs, else None."""
    i = 0
    log_level: list[str] = []
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] == "--log-level":
            log_level = list(argv[i : i + 2])
            i += 2
        else:
            i += 1
    if i < len(argv) and argv[i] in SPARK_JOBS:
        name = argv[i]
        passed = log_level if name in _JOBS_WITH_LOG_LEVEL else []
        return name, [*passed, *argv[i + 1 :]]
    return None


def missing_for_job(name: str) -> str | None:
    """One line saying what to install for job ``name``, or None when all is there."""
    missing = [m for m in _SPARK_JOB_NEEDS[name] if importlib.util.find_spec(m) is None]
    if missing:
        return (
            f"minikafka {name} needs {', '.join(missing)} (the spark extra): "
            f"{INSTALL_SPARK_EXTRA}, or pip install 'minikafka[spark]'"
        )
    if name in _JOBS_NEEDING_JAVA and not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        return f"minikafka {name} needs Java 17 for Spark: install a JDK/JRE 17 or set JAVA_HOME"
    return None


def _run_spark_job(name: str, args: list[str]) -> int:
    import subprocess

    if "-h" not in args and "--help" not in args:
        problem = missing_for_job(name)
        if problem is not None:
            print(problem, file=sys.stderr)
            return 2
    return subprocess.call([sys.executable, "-m", SPARK_JOBS[name], *args])


# -- control endpoint and fault injection (broker/control/) ------------------------------


def _add_control_options(serve: argparse.ArgumentParser) -> None:
    serve.add_argument(
        "--control-port",
        type=int,
        default=None,
        help="run the HTTP control endpoint on this port (0: a free port); off by default",
    )
    serve.add_argument(
        "--control-host", default="127.0.0.1", help="control endpoint address (127.0.0.1)"
    )
    serve.add_argument(
        "--control-token",
        default=os.environ.get(TOKEN_ENV) or None,
        help=f"the token its state changes need (env {TOKEN_ENV}; made at start when not "
        "given, printed on the ready line; required to bind beyond loopback)",
    )


def _add_fault_parser(sub: Any) -> None:
    fault = sub.add_parser("fault", help="inject faults through a running control endpoint")
    fault.add_argument(
        "--control",
        default=os.environ.get("MINIKAFKA_CONTROL", DEFAULT_CONTROL),
        help=f"control endpoint URL (env MINIKAFKA_CONTROL; {DEFAULT_CONTROL}, as make run)",
    )
    fault.add_argument(
        "--control-token",
        default=None,
        help=f"its token (env {TOKEN_ENV}; by default the one `serve` wrote for that port)",
    )
    actions = fault.add_subparsers(dest="fault_command", required=True, metavar="ACTION")
    actions.add_parser(
        "status", help="overall status, problems, brokers, leaders, ISR, faults in force"
    )
    for name, text in (
        ("stop-broker", "stop a broker"),
        ("start-broker", "start a stopped broker"),
        ("pause-replication", "pause a broker's replica fetchers"),
        ("resume-replication", "resume a broker's replica fetchers (undoes pause and delay)"),
    ):
        actions.add_parser(name, help=text).add_argument("broker_id", type=int)
    delay = actions.add_parser("delay-replication", help="delay a broker's replica fetches")
    delay.add_argument("broker_id", type=int)
    delay.add_argument("ms", type=int)
    latency = actions.add_parser("latency", help="delay every response of a broker (0: off)")
    latency.add_argument("broker_id", type=int)
    latency.add_argument("ms", type=int)
    fail = actions.add_parser("fail", help="fail a broker's next N requests of an API")
    fail.add_argument("--broker", type=int, required=True, help="broker id")
    fail.add_argument("--api-key", required=True, help="API key or name (0 or Produce)")
    fail.add_argument(
        "--error", required=True, help="error code or name (6 or NOT_LEADER_OR_FOLLOWER)"
    )
    fail.add_argument("--count", type=int, default=1, help="how many requests (1)")
    fail.add_argument("--topic", default=None, help="only requests naming this topic")
    fail.add_argument("--partition", type=int, default=None, help="... and this partition")
    remote_slow = actions.add_parser(
        "remote-slow", help="every remote tier call MS later (tiered storage; 0: off)"
    )
    remote_slow.add_argument("ms", type=int)
    actions.add_parser("remote-down", help="the remote tier answers nothing until remote-up")
    actions.add_parser("remote-up", help="the remote tier answers again (undoes remote-down)")
    remote_fail = actions.add_parser(
        "remote-fail", help="remote tier calls of these kinds fail (none: stop failing)"
    )
    remote_fail.add_argument(
        "kinds", nargs="*", choices=["fetch-segment", "fetch-index", "copy", "delete"]
    )
    clear = actions.add_parser(
        "clear",
        help="clear every fault (latency, failures, replication pause and delay), "
        "of one broker or of all",
    )
    clear.add_argument("broker_id", type=int, nargs="?", default=None)


def _int_or_name(value: str) -> int | str:
    text = value.strip()
    return int(text) if text.lstrip("-").isdigit() else text


def _fault(args: argparse.Namespace) -> int:
    """One call on the control endpoint; prints its JSON answer, exit 1 on an error."""
    from broker.control.client import ControlClient, ControlClientError
    from broker.control.pretty import dumps

    client = ControlClient(args.control, token=args.control_token)
    command = args.fault_command
    calls: dict[str, Callable[[], Any]] = {
        "status": client.status,
        "stop-broker": lambda: client.stop_broker(args.broker_id),
        "start-broker": lambda: client.start_broker(args.broker_id),
        "pause-replication": lambda: client.replication(args.broker_id, "pause"),
        "resume-replication": lambda: client.replication(args.broker_id, "resume"),
        "delay-replication": lambda: client.replication(args.broker_id, "delay", args.ms),
        "latency": lambda: client.latency(args.broker_id, args.ms),
        "fail": lambda: client.fail(
            args.broker,
            _int_or_name(args.api_key),
            _int_or_name(args.error),
            args.count,
            args.topic,
            args.partition,
        ),
        "remote-slow": lambda: client.remote(slow_ms=args.ms),
        "remote-down": lambda: client.remote(down=True),
        "remote-up": lambda: client.remote(down=False),
        "remote-fail": lambda: client.remote(failing=list(args.kinds)),
        "clear": lambda: client.clear(args.broker_id),
    }
    try:
        answer = calls[command]()
    except ControlClientError as exc:
        print(f"minikafka fault {command}: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(dumps(answer))
    return 0


# -- serve --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServePlan:
    """What ``serve`` will run, every argument checked."""

    config: BrokerConfig
    ignored: tuple[str, ...]
    brokers: int
    host: str
    port: int
    advertised_host: str | None
    data_dir: Path | None
    capture_dir: Path | None
    control_port: int | None
    control_host: str
    control_token: str | None = None
    security: SecuritySetup | None = None
    scram_seeds: tuple[str, ...] = ()


def _check_port(value: int, what: str) -> None:
    if not 0 <= value <= 65535:
        raise UsageError(f"{what} {value} is not a port (0..65535)")


def _writable_dir(path: Path, what: str) -> Path:
    """Create ``path`` if needed and prove it takes a file; UsageError naming it if not."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UsageError(f"{what} {path} is not a directory") from None
    except OSError as exc:
        raise UsageError(f"{what} {path} cannot be created: {exc.strerror or exc}") from None
    if not path.is_dir():
        raise UsageError(f"{what} {path} is not a directory")
    try:
        with tempfile.TemporaryFile(dir=path, prefix=".minikafka-write-check-"):
            pass
    except OSError as exc:
        raise UsageError(f"{what} {path} is not writable: {exc.strerror or exc}") from None
    return path


def plan_serve(args: argparse.Namespace) -> ServePlan:
    """Check every ``serve`` argument before anything starts (UsageError, ConfigError)."""
    from broker.config.broker_config import ConfigError, parse_overrides, read_config

    if not 1 <= args.brokers <= MAX_BROKERS:
        raise UsageError(f"--brokers must be 1..{MAX_BROKERS}, not {args.brokers}")
    overrides = parse_overrides(args.override)
    loaded = read_config(args.config, overrides)
    config = loaded.config
    if args.client_telemetry and not config.client_telemetry_enabled:
        reporters = f"{config.metric_reporters},{CLIENT_TELEMETRY_RECEIVER}".lstrip(",")
        overrides["metric.reporters"] = reporters
        loaded = read_config(args.config, overrides)
        config = loaded.config
    listener = config.client_listener()
    port = args.port if args.port is not None else listener.port if listener else 9092
    security = None
    if args.security is not None:
        security = _security_setup(args, config, port)
        loaded = read_config(args.config, {**security.overrides, **overrides})
        config = loaded.config
    from broker.security.listeners import ListenerConfigError, security_listeners

    try:
        security_listeners(config)  # a keystore that cannot be read is a config error
    except ListenerConfigError as exc:
        raise ConfigError(str(exc)) from None
    seeds = (*(security.scram_seeds if security else ()), *args.add_scram)
    for spec in args.add_scram:
        try:
            ScramCredentialStore().add_scram(spec, os.urandom)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    _check_port(port, "--port" if args.port is not None else "listeners port")
    if port != 0 and port + args.brokers - 1 > 65535:
        raise UsageError(
            f"--brokers {args.brokers} from port {port} needs ports up to "
            f"{port + args.brokers - 1}, past 65535"
        )
    if args.host is not None:
        host = args.host
    elif listener is not None:
        host = listener.host or "0.0.0.0"  # Kafka: an empty host binds every interface
    else:
        host = "127.0.0.1"
    if not host.strip():
        raise UsageError("--host must not be empty")
    advertised = args.advertised_host or (listener.advertised_host if listener else None)
    if args.control_port is not None:
        _check_port(args.control_port, "--control-port")
        if port != 0 and port <= args.control_port < port + args.brokers:
            raise UsageError(
                f"--control-port {args.control_port} is broker {args.control_port - port}'s port"
            )
        if args.control_token is None and not is_loopback(args.control_host):
            raise UsageError(
                f"--control-host {args.control_host} is not a loopback address: give "
                f"--control-token (or {TOKEN_ENV}), or anyone who reaches it can stop brokers"
            )
    data_dir = args.data_dir
    data_what = "--data-dir"
    if data_dir is None and config.log_dirs:
        data_dir, data_what = Path(config.log_dirs.split(",")[0].strip()), "log.dirs"
    if data_dir is not None:
        _writable_dir(data_dir, data_what)
    if args.capture_dir is not None:
        _writable_dir(args.capture_dir, "--capture-dir")
    return ServePlan(
        config=config,
        ignored=loaded.ignored,
        brokers=args.brokers,
        host=host,
        port=port,
        advertised_host=advertised,
        data_dir=data_dir,
        capture_dir=args.capture_dir,
        control_port=args.control_port,
        control_host=args.control_host,
        control_token=args.control_token,
        security=security,
        scram_seeds=seeds,
    )


def _security_setup(args: argparse.Namespace, config: BrokerConfig, port: int) -> SecuritySetup:
    """``--security``: certificates, listener configs and a user (quickstart.py)."""
    if config.listeners:
        raise UsageError("--security makes its own listeners: drop listeners= from the config")
    directory = args.security_dir
    if directory is None and args.data_dir is not None:
        directory = args.data_dir / "security"
    if directory is None:
        directory = Path(tempfile.mkdtemp(prefix="minikafka-security-"))
    _writable_dir(directory, "--security-dir")
    host = args.host or "127.0.0.1"
    password = secrets.token_urlsafe(12)
    return security_setup(args.security, directory, host, port, args.brokers, password)


async def _serve(
    plan: ServePlan,
    config_file: Path | None,
    gc_threshold: tuple[int, int, int] | None = None,
    gc_freeze: bool = False,
) -> int:
    from broker.app import MiniKafka  # the tools need none of the broker

    # Everything is imported and no broker is built yet: what lives as long as the
    # process is frozen (a stopped broker's objects must stay collectable).
    apply_gc_policy(gc_threshold, freeze=gc_freeze)
    if plan.ignored:
        log.warning(
            "Ignoring %d configs of %s that minikafka does not model: %s",
            len(plan.ignored),
            config_file,
            ", ".join(plan.ignored),
        )
    try:
        app = MiniKafka(
            plan.config,
            brokers=plan.brokers,
            host=plan.host,
            port=plan.port,
            data_dir=plan.data_dir,
            control_port=plan.control_port,
            control_host=plan.control_host,
            control_token=plan.control_token,
            capture_dir=plan.capture_dir,
            advertised_host=plan.advertised_host,
        )
    except (OSError, ValueError) as exc:
        print(f"minikafka: cannot start: {_describe_error(exc)}", file=sys.stderr)
        return 1
    for spec in plan.scram_seeds:
        app.scram_credentials.add_scram(spec, os.urandom)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await app.start()
    except Exception as exc:
        log.debug("start failed", exc_info=True)
        await app.stop()
        print(f"minikafka: {_start_error(exc, plan)}", file=sys.stderr)
        return 1
    control = _control_settings(app)
    secure = _write_client_settings(app, plan.security) if plan.security is not None else ""
    print(f"minikafka ready: bootstrap={app.bootstrap}{control}{secure}", flush=True)
    try:
        await stop.wait()
        log.info("shutting down")
        await app.stop()
    finally:
        if app.control_url is not None:
            remove_token(_port_of(app.control_url), app.control_token)
    return 0


def _port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/", 1)[0])


def _control_settings(app: MiniKafka) -> str:
    """The ready line's control part: the endpoint, its token (also written where
    ``minikafka fault`` finds it, broker/control/token_file.py) and the console."""
    url = app.control_url
    if url is None:
        return ""
    token = app.control_token
    try:
        write_token(_port_of(url), token)
    except OSError as exc:
        log.warning("could not write the control token file: %s (pass --control-token)", exc)
    return f" control={url} control_token={token} console={url}/console?token={token}"


def _write_client_settings(app: MiniKafka, security: SecuritySetup) -> str:
    """Write client.properties for the started listener; the ready line's addition."""
    bootstrap = app.listener_bootstrap(security.listener_name)
    client = dataclasses.replace(security.client, bootstrap_servers=bootstrap)
    path = client.properties_file
    assert path is not None
    path.write_text(client.properties())
    return f" {security.listener_name}={bootstrap} client_config={path}"


def _describe_error(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or exc}"
    return str(exc) or type(exc).__name__


def _start_error(exc: BaseException, plan: ServePlan) -> str:
    """One line for a start that failed: a file, a listener, or something else."""
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"cannot use the data directory: {exc.filename}: {exc.strerror or exc}"
    if isinstance(exc, OSError):
        ports = (
            "free ports"
            if plan.port == 0
            else f"ports {plan.port}..{plan.port + plan.brokers - 1}"
            if plan.brokers > 1
            else f"port {plan.port}"
        )
        return f"cannot listen on {plan.host} ({ports}): {exc.strerror or exc}"
    return f"cannot start: {type(exc).__name__}: {exc} (--log-level DEBUG shows where)"


def run_async(factory: Callable[[], Coroutine[Any, Any, int]]) -> int:
    """Run on uvloop when it is installed, else on the default loop."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        return asyncio.run(factory())
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(factory())


def main(argv: Sequence[str] | None = None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    job = _spark_job(raw)
    if job is not None:
        return _run_spark_job(*job)
    parser = build_parser()
    if "metadata-quorum" in raw:  # (imported here: most commands never need it)
        from kafka_tools.admin_metadata_quorum import joined_directory_ids

        raw = joined_directory_ids(raw)
    args = parser.parse_args(raw)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        if args.command == "simulate":
            from simulation.command import run_simulate  # aiokafka only when asked

            return run_simulate(args, sys.argv[1:] if argv is None else argv)
        if args.command == "serve":
            return _serve_command(args)
        if args.command == "fault":
            return _fault(args)
        from kafka_tools.admin_cli import ADMIN_COMMANDS, run_admin

        if args.command in ADMIN_COMMANDS:
            return run_admin(args, run_async)
    except UsageError as exc:
        print(f"minikafka {args.command}: error: {exc}", file=sys.stderr)
        return 2
    parser.error(f"unknown command {args.command}")


def _serve_command(args: argparse.Namespace) -> int:
    """``serve``. The broker config (a pydantic model of every Kafka config: half a second
    to build) is imported here, so that Kafka's tools and ``fault`` start without it."""
    from broker.config.broker_config import ConfigError

    try:
        plan = plan_serve(args)
        install_gc_log_from_env()  # MINIKAFKA_GC_LOG: the benchmarks read it
        return run_async(lambda: _serve(plan, args.config, args.gc_threshold, args.gc_freeze))
    except ConfigError as exc:
        print(f"minikafka serve: configuration error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
