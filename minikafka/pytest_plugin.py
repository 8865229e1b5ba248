"""A pytest plugin: a real Kafka-compatible cluster for your tests, no Docker, no JVM.

Installing minikafka registers it (the ``pytest11`` entry point ``minikafka``); there is
nothing to import. It gives two fixtures::

    def test_orders(minikafka):                     # a 1-broker cluster on free ports
        producer = KafkaProducer(bootstrap_servers=minikafka.bootstrap_servers)
        ...

    @pytest.mark.minikafka(brokers=3, overrides={"default.replication.factor": "3"})
    async def test_failover(minikafka):             # the marker sizes the fixture
        minikafka.stop_broker(1)
        ...

    def test_two_clusters(minikafka_factory):       # as many clusters as a test wants
        a = minikafka_factory(brokers=3, min_insync_replicas=2)
        b = minikafka_factory(overrides={"num.partitions": "6"})

Defaults for ``minikafka`` come from the marker, else the ini options
``minikafka_brokers`` (1) and ``minikafka_overrides`` (lines of ``key=value``, Kafka's
config names); ``group.initial.rebalance.delay.ms`` is 0 unless set (Kafka's 3000 would
make every consumer group test wait 3 s for its first rebalance).

Each cluster runs in a thread of its own with its own event loop, so it serves sync
clients (kafka-python, confluent-kafka) and async ones (aiokafka, in pytest-asyncio's
loop or any other) alike, and the controls below are plain calls from the test. It
starts in milliseconds and is stopped when the test ends. The fixture's object:

* ``bootstrap_servers`` -- ``"127.0.0.1:PORT[,...]"``; ``config`` -- the broker config
  (``BrokerConfig``, Kafka's names as aliases); ``brokers`` -- how many;
* ``create_topic(name, partitions=1, replication_factor=None, configs=None)``;
* faults: ``stop_broker(i)``, ``start_broker(i)``, ``pause_replication(i)``,
  ``resume_replication(i)``, ``delay_replication(i, ms)``, ``set_latency(i, ms)``,
  ``fail(broker, api_key, error, count=1, topic=None, partition=None)``,
  ``clear_faults(broker=None)``;
* client quotas: ``set_quota({"client-id": "slow"}, {"producer_byte_rate": 1024})``
  (a None name is the default, a None value removes), or
  ``@pytest.mark.minikafka(quotas=[(entity, values), ...])``;
* ``security="sasl_ssl"`` (or ``"sasl_plaintext"``, ``"ssl"``; marker, factory) adds a
  secure listener as ``minikafka serve --security`` does; ``client_settings`` is then
  what a client needs (``security_protocol``, ``bootstrap_servers`` of that listener,
  ``sasl_mechanism``, ``username``, ``password``, ``ca_file``, ``client_cert_file``,
  ``properties()``), else None;
* ``control_port=0`` (marker, factory) runs the control endpoint and its console:
  ``control_url``, ``control_token`` and ``control`` (a client sending the token);
* ``call(fn, *args)`` runs ``fn`` on the cluster's loop (for the ``MiniKafka`` object,
  ``app``, which must only be touched there) and ``run(coroutine)`` awaits one there.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import secrets
import tempfile
import threading
from collections.abc import Callable, Coroutine, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

if TYPE_CHECKING:
    from broker.app import MiniKafka
    from broker.config.broker_config import BrokerConfig
    from broker.control.client import ControlClient
    from broker.security.quickstart import ClientSettings, SecuritySetup

__all__ = ["MiniKafkaCluster", "start_cluster"]

T = TypeVar("T")

#: What the plugin sets unless the test says otherwise.
PLUGIN_DEFAULTS = {"group.initial.rebalance.delay.ms": "0"}
START_TIMEOUT_S = 30.0


class MiniKafkaCluster:
    """A running in-process cluster on its own thread and event loop."""

    def __init__(
        self,
        app: MiniKafka,
        loop: asyncio.AbstractEventLoop,
        thread: threading.Thread,
        client_settings: ClientSettings | None = None,
    ):
        self.app = app
        self.client_settings = client_settings
        self._loop = loop
        self._thread = thread
        self.bootstrap_servers: str = app.bootstrap
        self.config: BrokerConfig = app.config
        self.brokers: int = app.num_brokers
        #: With ``control_port`` (marker or factory): the control endpoint and console
        #: (``/console``), and the token its state changes need; ``control`` is a client
        #: that sends it (``control.stop_broker(1)`` as ``minikafka fault`` does).
        self.control_url: str | None = app.control_url
        self.control_token: str = app.control_token

    @property
    def control(self) -> ControlClient:
        from broker.control.client import ControlClient

        if self.control_url is None:
            raise RuntimeError("this cluster runs no control endpoint: pass control_port=0")
        return ControlClient(self.control_url, token=self.control_token)

    def __repr__(self) -> str:
        return f"MiniKafkaCluster(brokers={self.brokers}, bootstrap={self.bootstrap_servers!r})"

    # -- running things on the cluster's loop ---------------------------------------------

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = START_TIMEOUT_S) -> T:
        """Await ``coroutine`` on the cluster's loop; its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Call ``fn(*args)`` on the cluster's loop (between two requests); its result."""

        async def call() -> T:
            return fn(*args)

        return self.run(call())

    # -- topics -------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int | None = None,
        configs: Mapping[str, str] | None = None,
    ) -> None:
        """Create a topic (``default.replication.factor`` when not given)."""
        rf = replication_factor or min(self.config.default_replication_factor, self.brokers)

        def create() -> None:
            topic_configs = {**self.config.default_topic_configs(), **dict(configs or {})}
            self.app.cluster.create_topic(name, partitions, rf, topic_configs)

        self.call(create)

    # -- client quotas ------------------------------------------------------------------

    def set_quota(
        self, entity: Mapping[str, str | None], values: Mapping[str, float | None]
    ) -> None:
        """Set (or, with None, remove) client quotas, as AlterClientQuotas: ``entity``
        maps ``user``/``client-id`` to a name or None (the default), e.g.
        ``set_quota({"client-id": "slow"}, {"producer_byte_rate": 1024})``. A value
        Kafka refuses is a ValueError with Kafka's message."""
        from broker.quota.client_quota_store import QuotaAlteration

        alteration = QuotaAlteration(tuple(entity.items()), tuple(values.items()))

        def alter() -> None:
            (result,) = self.app.client_quotas.alter([alteration], False)
            if result.failed:
                raise ValueError(result.message)

        self.call(alter)

    # -- faults -------------------------------------------------------------------------

    def stop_broker(self, broker_id: int) -> None:
        """Stop a broker as if its process died; leaders move to the ISR."""
        self.run(self.app.stop_broker(broker_id))

    def start_broker(self, broker_id: int) -> None:
        """Start a stopped broker again on its port; it catches up and rejoins the ISR."""
        self.run(self.app.start_broker(broker_id))

    def pause_replication(self, broker_id: int) -> None:
        self.call(self.app.pause_replication, broker_id)

    def resume_replication(self, broker_id: int) -> None:
        self.call(self.app.resume_replication, broker_id)

    def delay_replication(self, broker_id: int, ms: int) -> None:
        self.call(self.app.set_replication_delay_ms, broker_id, ms)

    def set_latency(self, broker_id: int, ms: int) -> None:
        """Every response of ``broker_id`` ``ms`` late (0: none)."""
        self.call(self.app.faults.set_latency, broker_id, ms)

    def fail(
        self,
        broker_id: int,
        api_key: int | str,
        error: int | str,
        count: int = 1,
        topic: str | None = None,
        partition: int | None = None,
    ) -> None:
        """Answer the next ``count`` requests of ``api_key`` (``"Produce"`` or 0) on
        ``broker_id`` with ``error`` (``"NOT_LEADER_OR_FOLLOWER"`` or 6)."""
        self.call(self.app.faults.add_failure, broker_id, api_key, error, count, topic, partition)

    def remote_slow(self, ms: int) -> None:
        """Tiered storage: every remote tier call ``ms`` later (0: off)."""
        self.call(self._remote().set_slow, ms)

    def remote_down(self, down: bool = True) -> None:
        """Tiered storage: the remote tier answers nothing until ``remote_down(False)``."""
        self.call(self._remote().set_down, down)

    def _remote(self) -> Any:
        remote = self.app.remote_storage
        if remote is None:
            raise RuntimeError("tiered storage is off: set remote.log.storage.system.enable")
        return remote

    def clear_faults(self, broker_id: int | None = None) -> None:
        """Clear every fault (latency, failures, replication pause and delay; the remote
        tier's when clearing all)."""

        def clear() -> None:
            self.app.faults.clear(broker_id)
            self.app.clear_replication_faults(broker_id)
            if broker_id is None and self.app.remote_storage is not None:
                self.app.remote_storage.clear_faults()

        self.call(clear)

    # -- life -----------------------------------------------------------------------------

    def stop(self) -> None:
        if not self._loop.is_closed() and self._thread.is_alive():
            try:
                self.run(self.app.stop())
            finally:
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join(START_TIMEOUT_S)


def start_cluster(
    brokers: int = 1, overrides: Mapping[str, object] | None = None, **kwargs: Any
) -> MiniKafkaCluster:
    """Start a cluster on free ports in a thread of its own; ``stop()`` it when done.

    ``overrides`` uses Kafka's names (``{"num.partitions": "3"}``); ``kwargs`` are
    ``MiniKafka``'s own arguments (``data_dir``, ``control_port``, ``capture_dir``),
    ``quotas`` (a list of ``(entity, values)`` as ``MiniKafkaCluster.set_quota`` takes,
    set before the fixture is handed over) or configs by their Python names
    (``num_partitions=3``).
    """
    from broker.app import MiniKafka
    from broker.config.broker_config import BrokerConfig

    app_args = {
        k: kwargs.pop(k)
        for k in ("data_dir", "control_port", "control_token", "capture_dir")
        if k in kwargs
    }
    quotas = list(kwargs.pop("quotas", None) or ())
    setup = _security(kwargs.pop("security", None), brokers)
    values: dict[str, object] = {**PLUGIN_DEFAULTS, **(setup.overrides if setup else {})}
    for key, value in {**dict(overrides or {}), **kwargs}.items():
        alias = BrokerConfig.model_fields[key].alias if key in BrokerConfig.model_fields else None
        values.pop(alias or key, None)
        values[key] = value
    config = BrokerConfig.model_validate(values)
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        loop.run_forever()
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()

    thread = threading.Thread(target=serve, name="minikafka", daemon=True)
    thread.start()
    ready.wait(START_TIMEOUT_S)

    async def build() -> MiniKafka:
        app = MiniKafka(config, brokers=brokers, port=0, **app_args)
        for spec in setup.scram_seeds if setup else ():
            app.scram_credentials.add_scram(spec, os.urandom)
        await app.start()
        return app

    try:
        app = asyncio.run_coroutine_threadsafe(build(), loop).result(START_TIMEOUT_S)
    except BaseException:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(START_TIMEOUT_S)
        raise
    client = None
    if setup is not None:
        bootstrap = app.listener_bootstrap(setup.listener_name)
        client = dataclasses.replace(setup.client, bootstrap_servers=bootstrap)
    cluster = MiniKafkaCluster(app, loop, thread, client)
    try:
        for quota_entity, quota_values in quotas:
            cluster.set_quota(quota_entity, quota_values)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _security(mode: str | None, brokers: int) -> SecuritySetup | None:
    """``security=...``: certificates in a temporary directory, as ``serve --security``."""
    if mode is None:
        return None
    from broker.security.quickstart import MODES, security_setup

    if mode not in MODES:
        raise ValueError(f"security={mode!r}: one of {', '.join(MODES)}")
    directory = Path(tempfile.mkdtemp(prefix="minikafka-security-"))
    return security_setup(mode, directory, "127.0.0.1", 0, brokers, secrets.token_urlsafe(12))


# -- pytest hooks and fixtures --------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "minikafka_brokers", "brokers of the minikafka fixture's cluster (1)", default="1"
    )
    parser.addini(
        "minikafka_overrides",
        "broker configs of the minikafka fixture, one key=value per line (Kafka's names)",
        type="linelist",
        default=[],
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "minikafka(brokers=1, overrides=None, security=None, **kwargs): the minikafka "
        "fixture's cluster (brokers, Kafka configs by name, or start_cluster's keyword "
        "arguments)",
    )


def _ini_overrides(config: pytest.Config) -> dict[str, str]:
    result: dict[str, str] = {}
    for line in config.getini("minikafka_overrides"):
        key, sep, value = str(line).partition("=")
        if not sep:
            raise pytest.UsageError(f"minikafka_overrides: {line!r} is not key=value")
        result[key.strip()] = value.strip()
    return result


@pytest.fixture
def minikafka_factory(request: pytest.FixtureRequest) -> Iterator[Callable[..., MiniKafkaCluster]]:
    """``minikafka_factory(brokers=1, overrides=None, **kwargs)`` starts a cluster (see
    ``start_cluster``); every cluster it started is stopped when the test ends."""
    started: list[MiniKafkaCluster] = []

    def factory(
        brokers: int = 1, overrides: Mapping[str, object] | None = None, **kwargs: Any
    ) -> MiniKafkaCluster:
        cluster = start_cluster(brokers, overrides, **kwargs)
        started.append(cluster)
        return cluster

    yield factory
    for cluster in reversed(started):
        cluster.stop()


@pytest.fixture
def minikafka(
    request: pytest.FixtureRequest, minikafka_factory: Callable[..., MiniKafkaCluster]
) -> MiniKafkaCluster:
    """A running cluster on free ports: ``bootstrap_servers``, faults, ``config``.

    Sized by ``@pytest.mark.minikafka(brokers=..., overrides={...})``, else by the ini
    options ``minikafka_brokers`` and ``minikafka_overrides``."""
    config = request.config
    brokers = int(config.getini("minikafka_brokers") or 1)
    overrides: dict[str, object] = dict(_ini_overrides(config))
    kwargs: dict[str, Any] = {}
    marker = request.node.get_closest_marker("minikafka")
    if marker is not None:
        if marker.args:
            brokers = int(marker.args[0])
        kwargs = dict(marker.kwargs)
        brokers = int(kwargs.pop("brokers", brokers))
        overrides.update(kwargs.pop("overrides", None) or {})
    return minikafka_factory(brokers, overrides, **kwargs)
