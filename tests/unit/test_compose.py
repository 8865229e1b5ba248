"""docker-compose.yml is a valid Compose file with the services of the capture/replay loop.

Validated offline against the Compose specification that check-jsonschema ships
(``--builtin-schema vendor.compose-spec``): no Docker and no network needed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML  # comes with check-jsonschema

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
README = ROOT / "README.md"
PYPROJECT = ROOT / "pyproject.toml"


def check_jsonschema() -> str:
    local = Path(sys.executable).with_name("check-jsonschema")
    found = str(local) if local.exists() else shutil.which("check-jsonschema")
    if found is None:
        pytest.fail("check-jsonschema is not installed (it is in the dev extra)")
    return found


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    doc = YAML(typ="safe").load(COMPOSE.read_text())
    assert isinstance(doc, dict)
    return doc


def test_compose_file_matches_the_compose_spec() -> None:
    proc = subprocess.run(
        [check_jsonschema(), "--builtin-schema", "vendor.compose-spec", str(COMPOSE)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_validator_rejects_a_broken_file(tmp_path: Path) -> None:
    # Guards the test above against a validator that accepts anything.
    bad = tmp_path / "docker-compose.yml"
    bad.write_text("services:\n  broker:\n    image: 5\n    depends_on: {nope: {condition: x}}\n")
    proc = subprocess.run(
        [check_jsonschema(), "--builtin-schema", "vendor.compose-spec", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0


def test_services_of_the_loop_exist(compose: dict[str, Any]) -> None:
    services = compose["services"]
    expected = {"broker", "replay-broker", "spark-master", "spark-worker"}
    expected |= {"workload", "replay", "report"}
    assert expected <= set(services)


def command(service: dict[str, Any]) -> str:
    cmd = service["command"]
    return " ".join(cmd) if isinstance(cmd, list) else str(cmd)


def test_commands(compose: dict[str, Any]) -> None:
    """Every minikafka command in the file is one our CLI accepts, with these values."""
    from minikafka.cli import build_parser

    s = compose["services"]
    parser = build_parser()

    def parse(service: str) -> Any:
        argv = command(s[service]).split()
        assert argv[0] == "minikafka"
        return parser.parse_args(argv[1:])

    for service, advertised in (("broker", "broker"), ("replay-broker", "replay-broker")):
        serve = parse(service)
        assert (serve.command, serve.brokers, serve.host, serve.port) == (
            "serve",
            3,
            "0.0.0.0",
            9092,
        )
        # Clients in other containers must be told a name they can reach, not 0.0.0.0.
        assert serve.advertised_host == advertised
    assert str(parse("broker").capture_dir) == "/captures"
    # The target captures too: the report joins its records with the replay's.
    assert str(parse("replay-broker").capture_dir) == "/target-captures"
    assert command(s["workload"]) == "minikafka workload --bootstrap broker:9092 --duration 30"
    assert command(s["replay"]) == (
        "minikafka replay --capture /captures --bootstrap replay-broker:9092 "
        "--out /results --master spark://spark-master:7077 --target-capture /target-captures"
    )
    assert command(s["report"]) == "minikafka report --results /results --out /report"
    assert "spark://spark-master:7077" in command(s["spark-worker"])


def test_dependencies_wait_for_health_and_completion(compose: dict[str, Any]) -> None:
    s = compose["services"]
    for name, service in s.items():
        for dep, spec in service.get("depends_on", {}).items():
            assert dep in s, f"{name} depends on unknown {dep}"
            condition = spec["condition"]
            if condition == "service_healthy":
                assert "healthcheck" in s[dep], f"{name} waits for {dep}'s health, it has none"
    assert s["workload"]["depends_on"]["broker"]["condition"] == "service_healthy"
    replay_deps = s["replay"]["depends_on"]
    assert replay_deps["workload"]["condition"] == "service_completed_successfully"
    assert replay_deps["replay-broker"]["condition"] == "service_healthy"
    assert s["report"]["depends_on"]["replay"]["condition"] == "service_completed_successfully"


def test_spark_versions_agree(compose: dict[str, Any]) -> None:
    # A standalone master and its workers must run one Spark version: the master's
    # image tag, the build arg, and the Dockerfile's default all name the same one.
    s = compose["services"]
    image, tag = s["spark-master"]["image"].split(":")
    assert image == "apache/spark" and tag[0].isdigit()
    assert s["spark-worker"]["build"]["args"]["SPARK_VERSION"] == tag
    assert f"ARG SPARK_VERSION={tag}" in DOCKERFILE.read_text()


def test_volumes_are_shared_where_the_data_flows(compose: dict[str, Any]) -> None:
    s = compose["services"]

    def mounts(name: str) -> set[str]:
        return {v.split(":")[0] + ":" + v.split(":")[1] for v in s[name].get("volumes", [])}

    assert "captures:/captures" in mounts("broker")
    for reader in ("replay", "spark-worker"):  # driver and executors read the capture
        assert "captures:/captures" in mounts(reader)
        assert "results:/results" in mounts(reader)
    assert "results:/results" in mounts("report")
    # The target's capture flows from replay-broker to the report, beside the capture.
    assert "target-captures:/target-captures" in mounts("replay-broker")
    assert {"captures:/captures", "target-captures:/target-captures"} <= mounts("report")
    assert {"captures", "target-captures", "results"} <= set(compose["volumes"])


def test_the_spark_worker_works_outside_the_package_dir(compose: dict[str, Any]) -> None:
    """pyspark's package dir is root's: the worker (our user) writes its work dir in /tmp."""
    worker = compose["services"]["spark-worker"]
    argv = command(worker).split()
    assert argv[argv.index("--work-dir") + 1] == worker["environment"]["SPARK_WORKER_DIR"]
    assert argv[argv.index("--work-dir") + 1].startswith("/tmp/")


def test_dockerfile_basics() -> None:
    text = DOCKERFILE.read_text()
    assert "FROM python:3.11-slim" in text
    assert "openjdk-17-jre-headless" in text
    assert '".[spark]"' in text


def _header_commands() -> list[str]:
    return [
        line.lstrip("#").strip()
        for line in COMPOSE.read_text().splitlines()
        if line.lstrip("#").strip().startswith("docker compose ")
    ]


def test_the_readme_shows_the_files_own_commands() -> None:
    header = _header_commands()
    assert header and header[0].startswith("docker compose up --build report")
    readme = [
        line.strip()
        for line in README.read_text().splitlines()
        if line.strip().startswith("docker compose ")
    ]
    assert readme == header


def test_the_image_has_what_every_service_runs() -> None:
    """The image installs the spark extra; it must hold what each service imports: the
    workload aiokafka, the replay and report PySpark (pyarrow, matplotlib)."""
    import tomllib

    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    names = {re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0].lower() for req in extras["spark"]}
    assert {"aiokafka", "pyspark", "pyarrow", "matplotlib"} <= names
    assert 'pip install ".[spark]"' in DOCKERFILE.read_text()
    # and each service's command is one the image's minikafka has
    from minikafka.cli import SPARK_JOBS

    s = YAML(typ="safe").load(COMPOSE.read_text())["services"]
    for name in ("workload", "replay", "report"):
        assert command(s[name]).split()[1] in SPARK_JOBS


def test_the_image_copies_every_package_the_product_installs() -> None:
    # `minikafka` (the console script every service runs) lives in minikafka/ and runs
    # simulation/ and virtual_time/: an image without them starts nothing. testkit is the
    # test suite's and the benches' kit, not the product's.
    import tomllib

    include = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["packages"]["find"]
    packages = {pattern.rstrip("*") for pattern in include["include"]} - {"testkit"}
    copied = set(re.findall(r"^COPY (\w+) \./\1$", DOCKERFILE.read_text(), re.MULTILINE))
    assert packages - copied == set()
