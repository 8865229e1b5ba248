"""``minikafka serve`` checks its arguments before starting, and reads Kafka's own
server.properties."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from broker.config.broker_config import model_keys, parse_properties
from tests.integration.conftest import BrokerProcess

STOCK = Path(__file__).resolve().parents[1] / "data" / "server.properties"


def serve(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "minikafka", "serve", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "ready" not in result.stdout
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--port", "70000"], "--port 70000 is not a port (0..65535)"),
        (["--port", "-1"], "--port -1 is not a port"),
        (["--port", "65535", "--brokers", "3"], "needs ports up to 65537, past 65535"),
        (["--brokers", "0"], "--brokers must be 1..64, not 0"),
        (["--brokers", "-2"], "--brokers must be 1..64"),
        (["--brokers", "100000"], "--brokers must be 1..64"),
        (["--brokers", "two"], "argument --brokers: invalid int value: 'two'"),
        (["--port", "0", "--control-port", "70000"], "--control-port 70000 is not a port"),
        (["--port", "9092", "--brokers", "3", "--control-port", "9093"], "broker 1's port"),
        (["--port", "0", "--override", "num.partiton=3"], "did you mean 'num.partitions'"),
        (["--port", "0", "--override", "nonsense"], "--override expects key=value"),
        (["--port", "0", "--config", "/nonexistent/server.properties"], "cannot read config"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(args: list[str], words: str) -> None:
    line = one_line_error(serve(*args))
    assert line.startswith("minikafka")
    assert words in line


def test_data_dir_is_created_and_must_be_a_writable_directory(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    line = one_line_error(serve("--port", "0", "--data-dir", str(a_file)))
    assert f"--data-dir {a_file} is not a directory" in line
    assert "cannot listen" not in line
    line = one_line_error(serve("--port", "0", "--data-dir", str(a_file / "below")))
    assert f"--data-dir {a_file / 'below'} cannot be created" in line
    line = one_line_error(serve("--port", "0", "--capture-dir", str(a_file)))
    assert f"--capture-dir {a_file} is not a directory" in line
    # log.dirs from the config is checked the same way, and named as such.
    line = one_line_error(serve("--port", "0", "--override", f"log.dirs={a_file}"))
    assert f"log.dirs {a_file} is not a directory" in line


def test_missing_directories_are_created(
    tmp_path: Path, broker_process: type[BrokerProcess]
) -> None:
    data, captures = tmp_path / "new" / "data", tmp_path / "new" / "captures"
    proc = broker_process(["--data-dir", str(data), "--capture-dir", str(captures)])
    assert data.is_dir() and captures.is_dir()
    assert proc.terminate() == 0


def test_a_port_in_use_is_one_line_naming_it(broker_process: type[BrokerProcess]) -> None:
    first = broker_process([])
    port = first.bootstrap.rsplit(":", 1)[1]
    result = serve("--port", port)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith(f"minikafka: cannot listen on 127.0.0.1 (port {port}): ")
    assert "Traceback" not in result.stderr
    assert first.terminate() == 0


def test_kafkas_stock_server_properties_starts_with_one_line_of_ignored_keys(
    tmp_path: Path, broker_process: type[BrokerProcess]
) -> None:
    # log.dirs=/tmp/kraft-combined-logs would be used as is; a test keeps to its tmp_path.
    proc = broker_process(
        ["--config", str(STOCK), "--host", "127.0.0.1", "--data-dir", str(tmp_path)]
    )
    # advertised.listeners=PLAINTEXT://localhost:9092 is what Metadata tells clients
    assert proc.bootstrap.startswith("localhost:")
    assert proc.terminate() == 0
    _, stderr = proc.proc.communicate(timeout=10)
    assert "Traceback" not in stderr
    noisy = [line for line in stderr.splitlines() if re.search(r" (WARNING|ERROR|CRITICAL) ", line)]
    assert len(noisy) == 1, stderr
    (line,) = noisy
    ignored = sorted(set(parse_properties(STOCK.read_text())) - model_keys())
    assert line.endswith(
        f"Ignoring {len(ignored)} configs of {STOCK} that minikafka does not model: "
        + ", ".join(ignored)
    ), line


def test_listeners_give_the_port_when_no_port_is_given(
    tmp_path: Path,
) -> None:
    props = tmp_path / "server.properties"
    props.write_text("listeners=PLAINTEXT://127.0.0.1:0\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "minikafka", "serve", "--config", str(props)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("minikafka ready: bootstrap=127.0.0.1:"), line
        assert not line.strip().endswith(":9092")
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.mark.parametrize(
    ("job", "missing", "words"),
    [
        ("workload", "aiokafka", "minikafka workload needs aiokafka (the spark extra): "),
        ("replay", "pyspark", "minikafka replay needs pyspark (the spark extra): "),
        ("report", "pyspark", "minikafka report needs pyspark (the spark extra): "),
    ],
)
def test_a_job_whose_extra_is_missing_says_what_to_install(
    job: str, missing: str, words: str, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    import importlib.util

    from minikafka import cli

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == missing else real(name, *a)
    )
    assert cli.main([job, "--bootstrap", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    (line,) = err.strip().splitlines()
    assert line.startswith(words)
    assert ".venv/bin/pip install -e '.[spark]'" in line


def test_a_job_without_java_says_so(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    from minikafka import cli

    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(cli.shutil, "which", lambda name: None)
    if cli.missing_for_job("replay") and "Java" not in (cli.missing_for_job("replay") or ""):
        pytest.skip("pyspark is not installed")
    assert cli.main(["replay", "--capture", "x"]) == 2
    assert "needs Java 17" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "level"),
    [
        (["serve"], "INFO"),
        (["--log-level", "WARNING", "serve"], "WARNING"),
        (["serve", "--log-level", "DEBUG"], "DEBUG"),
        (["serve", "--port", "0", "--log-level", "DEBUG", "--brokers", "2"], "DEBUG"),
        # given in both places, the one after the command wins
        (["--log-level", "ERROR", "serve", "--log-level", "DEBUG"], "DEBUG"),
        (["fault", "--log-level", "DEBUG", "status"], "DEBUG"),
    ],
)
def test_log_level_goes_before_or_after_the_command(argv: list[str], level: str) -> None:
    from minikafka import cli

    assert cli.build_parser().parse_args(argv).log_level == level


def test_serve_log_level_after_the_command_is_honoured(
    broker_process: type[BrokerProcess],
) -> None:
    # INFO lines (``broker 0 listening on ...``) are left out at WARNING.
    proc = broker_process(["--log-level", "WARNING"])
    assert proc.terminate() == 0
    _, stderr = proc.proc.communicate(timeout=10)
    assert "unrecognized arguments" not in stderr
    assert " INFO " not in stderr, stderr
