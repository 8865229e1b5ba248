"""server.properties as Kafka reads it: Java properties syntax, ignored keys, listeners."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config.broker_config import (
    ConfigError,
    ListenerEndpoint,
    model_keys,
    parse_listeners,
    parse_properties,
    read_config,
)

DATA = Path(__file__).resolve().parents[1] / "data"
STOCK = DATA / "server.properties"

#: Keys of Kafka's stock KRaft server.properties that a one-process simulator will
#: never model (socket buffers, the KRaft quorum). The share coordinator's
#: ``share.coordinator.state.topic.*`` keys are modelled now (``broker/share_coordinator/``),
#: and ``num.io.threads``/``num.network.threads`` by the simulation's request handlers.
NEVER_MODELLED = {
    "process.roles",
    "node.id",
    "controller.quorum.bootstrap.servers",
    "socket.send.buffer.bytes",
    "socket.receive.buffer.bytes",
    "num.recovery.threads.per.data.dir",
}


# -- Java properties syntax (java.util.Properties.load) ------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a=1", {"a": "1"}),
        ("a = 1", {"a": "1"}),
        ("a:1", {"a": "1"}),
        ("a : 1", {"a": "1"}),
        ("a 1", {"a": "1"}),  # whitespace alone separates
        ("a\t=\t1", {"a": "1"}),
        ("a", {"a": ""}),  # a key alone has the empty value
        ("a=", {"a": ""}),
        ("a==b", {"a": "=b"}),  # only the first separator separates
        ("a=b=c", {"a": "b=c"}),
        ("a=b:c", {"a": "b:c"}),
        ("   a=1", {"a": "1"}),  # leading whitespace is dropped
        ("a=1   ", {"a": "1   "}),  # trailing whitespace is kept (load_config trims)
        ("# comment\n! comment too\na=1", {"a": "1"}),
        ("  # an indented comment\na=1", {"a": "1"}),
        ("a=1 # not a comment", {"a": "1 # not a comment"}),
        ("a\\:b=c", {"a:b": "c"}),  # escaped separators belong to the key
        ("a\\=b=c", {"a=b": "c"}),
        ("a\\ b=c", {"a b": "c"}),
        ("a=x\\ty", {"a": "x\ty"}),
        ("a=x\\ny", {"a": "x\ny"}),
        ("a=\\u0041\\u00e9", {"a": "Aé"}),
        ("a=back\\\\slash", {"a": "back\\slash"}),
        ("a=\\q", {"a": "q"}),  # an unknown escape is the character itself
        ("a=1\\\n    2", {"a": "12"}),  # continuation, leading blanks of the next line go
        ("a=1\\\n  2\\\n  3", {"a": "123"}),
        ("a=1\\\\\nb=2", {"a": "1\\", "b": "2"}),  # an even number of \ does not continue
        ("a=1\\\n# still the value", {"a": "1# still the value"}),
        ("# comment \\\na=1", {"a": "1"}),  # a comment line never continues
        ("a=1\r\nb=2\rc=3", {"a": "1", "b": "2", "c": "3"}),  # Java's line terminators
        ("a=1\nb=2\na=3", {"a": "3", "b": "2"}),  # the last one wins
        ("a=tail\\", {"a": "tail"}),  # a continuation at the end of the file
        ("", {}),
        ("\n\n   \n", {}),
    ],
)
def test_java_properties_syntax(text: str, expected: dict[str, str]) -> None:
    assert parse_properties(text) == expected


def test_a_malformed_unicode_escape_names_the_line() -> None:
    with pytest.raises(ConfigError, match=r"f\.properties:2: malformed \\uxxxx"):
        parse_properties("a=1\nb=\\u12G4\n", "f.properties")


def test_values_are_trimmed_as_kafka_does(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("num.partitions = 3   \n")
    assert read_config(props).config.num_partitions == 3


def test_latin1_files_load(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_bytes(b"# caf\xe9\nnum.partitions=2\n")  # Java reads ISO-8859-1
    assert read_config(props).config.num_partitions == 2


# -- Kafka's stock server.properties ----------------------------------------------------------


def test_the_stock_kraft_file_loads_and_lists_what_it_ignores() -> None:
    loaded = read_config(STOCK)
    keys = set(parse_properties(STOCK.read_text()))
    assert set(loaded.ignored) == keys - model_keys()
    assert set(loaded.ignored) >= NEVER_MODELLED
    assert list(loaded.ignored) == sorted(loaded.ignored)
    config = loaded.config
    assert config.num_partitions == 1
    assert config.offsets_topic_replication_factor == 1
    assert config.log_dirs == "/tmp/kraft-combined-logs"
    assert config.log_retention_effective_ms == 168 * 3_600_000
    assert config.client_listener() == ListenerEndpoint("PLAINTEXT", "", 9092, "localhost")


def test_a_bad_value_of_a_modelled_key_in_a_file_is_still_an_error(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text(STOCK.read_text() + "\nnum.partitions=zero\n")
    with pytest.raises(ConfigError, match=r"'num\.partitions'"):
        read_config(props)


def test_an_unknown_key_in_a_file_is_ignored_but_on_the_command_line_an_error(
    tmp_path: Path,
) -> None:
    props = tmp_path / "server.properties"
    props.write_text("num.partiton=3\n")
    assert read_config(props).ignored == ("num.partiton",)
    with pytest.raises(ConfigError) as caught:
        read_config(None, {"num.partiton": "3"})
    message = str(caught.value)
    assert "unknown config key 'num.partiton'" in message
    assert "did you mean 'num.partitions'?" in message
    # Even a real Kafka key minikafka does not model: a command line asks for an effect.
    with pytest.raises(ConfigError, match=r"'socket\.send\.buffer\.bytes'"):
        read_config(None, {"socket.send.buffer.bytes": "102400"})


def test_overrides_win_over_the_file(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("num.partitions=2\n")
    assert read_config(props, {"num.partitions": "5"}).config.num_partitions == 5


def test_a_missing_file_is_one_line() -> None:
    with pytest.raises(ConfigError, match=r"cannot read config file /nonexistent\.properties"):
        read_config(Path("/nonexistent.properties"))


# -- listeners -> host, port, advertised host ------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"listeners": "PLAINTEXT://127.0.0.1:9192"}, ("127.0.0.1", 9192, None)),
        ({"listeners": "PLAINTEXT://:9092"}, ("", 9092, None)),
        ({"listeners": "PLAINTEXT://[::1]:9092"}, ("::1", 9092, None)),
        (
            {
                "listeners": "PLAINTEXT://0.0.0.0:9092",
                "advertised.listeners": "PLAINTEXT://broker:9092",
            },
            ("0.0.0.0", 9092, "broker"),
        ),
        (  # the controller's listener is not the broker's
            {
                "listeners": "CONTROLLER://:9093,PLAINTEXT://:9094",
                "controller.listener.names": "CONTROLLER",
            },
            ("", 9094, None),
        ),
        (  # inter.broker.listener.name picks among PLAINTEXT listeners
            {
                "listeners": "EXTERNAL://:9092,INTERNAL://:9192",
                "listener.security.protocol.map": "EXTERNAL:PLAINTEXT,INTERNAL:PLAINTEXT",
                "inter.broker.listener.name": "INTERNAL",
            },
            ("", 9192, None),
        ),
        (  # an SSL listener is passed over for a PLAINTEXT one
            {"listeners": "SSL://:9093,PLAINTEXT://:9092"},
            ("", 9092, None),
        ),
    ],
)
def test_listeners_give_host_port_and_advertised_host(
    overrides: dict[str, str], expected: tuple[str, int, str | None]
) -> None:
    listener = read_config(None, overrides).config.client_listener()
    assert listener is not None
    assert (listener.host, listener.port, listener.advertised_host) == expected


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"listeners": "localhost:9092"}, "is not NAME://host:port"),
        ({"listeners": "PLAINTEXT://:99999"}, "not in 0..65535"),
        ({"listeners": "SSL://:9093"}, "inter-broker traffic on PLAINTEXT"),
        (
            {"listeners": "CONTROLLER://:9093", "controller.listener.names": "CONTROLLER"},
            "no broker listener",
        ),
        ({"listeners": "A://:1,A://:2"}, "used once"),
        (
            {"listeners": "A://:1", "listener.security.protocol.map": "A"},
            "listener.security.protocol.map",
        ),
    ],
)
def test_bad_listeners_are_one_clear_error(overrides: dict[str, str], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        read_config(None, overrides)


def test_parse_listeners_upper_cases_names() -> None:
    assert parse_listeners("plaintext://h:1") == [ListenerEndpoint("PLAINTEXT", "h", 1)]


def test_no_listeners_means_the_command_line_decides() -> None:
    assert read_config().config.client_listener() is None
