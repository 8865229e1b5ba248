"""A broker's listeners as Kafka configures them, and what each does to a new connection.

``listeners`` (``NAME://host:port,...``), ``advertised.listeners`` and
``listener.security.protocol.map`` (Kafka's default map: PLAINTEXT, SSL, SASL_PLAINTEXT and
SASL_SSL each to itself) are parsed by
``broker/config/broker_config.py``; the PLAINTEXT listener it picks
(``client_listener()``) is the broker's primary one: its port is ``--port``'s, and
followers and the transaction marker sender connect to it. Every other broker listener is a
``ListenerConfig`` here, opened beside it with its own port (port 0: ephemeral; else
``port + broker id``, as ``--port`` gives brokers theirs).

Per-listener configs use Kafka's prefixes: ``listener.name.<listener>.<key>`` wins over
``<key>`` (listener name in lower case), e.g. ``listener.name.sasl_ssl.ssl.keystore.location``
(``ssl.client.auth`` on a SASL_SSL listener: the prefixed key only, KIP-684);
the SASL mechanisms of a listener come from ``sasl.enabled.mechanisms`` (Kafka's default:
GSSAPI, which minikafka does not serve: a SASL listener must name its mechanisms), PLAIN's
users from ``listener.name.<listener>.plain.sasl.jaas.config`` (Kafka's PlainLoginModule
``user_<name>="<password>"`` options).

``ChannelBuilder`` is Kafka's channel builder: for each new connection on its listener, the
principal TLS gives (``ssl_context.py``) and, on SASL listeners, a
``SaslServerAuthenticator`` (``sasl_server.py``) with the listener's mechanisms (SCRAM
also logs delegation tokens in, ``delegation_token_manager.py``).

``inter.broker.listener.name`` may name a TLS/SASL listener: followers and the
transaction marker sender then connect to it and authenticate like any client
(``inter_broker_client``, ``sasl_client.py``), with ``sasl.mechanism.inter.broker.protocol``
as the user of that listener's JAAS entry for the mechanism (``username``/``password``).

Differences from Kafka: a broker still needs one PLAINTEXT listener (its primary one:
``--port``, the tools' bootstrap); the brokers' own login is PLAIN or SCRAM (no OAUTHBEARER
token provider).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from broker.config.broker_config import (
    BrokerConfig,
    ListenerEndpoint,
    parse_listeners,
    security_protocol_map,
)
from broker.security.delegation_token_manager import DelegationTokenManager
from broker.security.jaas import JaasConfigError, parse_jaas_config, plain_users
from broker.security.oauthbearer import (
    DEFAULT_OPTIONS,
    OAuthBearerSaslServer,
    UnsecuredValidatorOptions,
)
from broker.security.plain import PlainSaslServer
from broker.security.principal import ANONYMOUS, KafkaPrincipal
from broker.security.sasl import (
    OAUTHBEARER,
    PLAIN,
    SUPPORTED_MECHANISMS,
    SaslServer,
)
from broker.security.sasl_client import InterBrokerClient
from broker.security.sasl_server import SaslServerAuthenticator
from broker.security.scram import SCRAM_MECHANISMS, ScramSaslServer
from broker.security.scram_credentials import ScramCredentialStore
from broker.security.ssl_context import (
    SslConfigError,
    build_client_ssl_context,
    build_server_ssl_context,
    ssl_principal,
)
from purgatory import Clock

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
MAX_REAUTH = "connections.max.reauth.ms"
INTER_BROKER_MECHANISM = "sasl.mechanism.inter.broker.protocol"
MAX_RECEIVE = "sasl.server.max.receive.size"
CLIENT_AUTH = "ssl.client.auth"
DEFAULT_SASL_MAX_RECEIVE_SIZE = 524288


class ListenerConfigError(ValueError):
    """A listener the broker cannot open."""


@dataclass(frozen=True)
class ListenerConfig:
    """One listener beside the primary PLAINTEXT one."""

    name: str
    security_protocol: str
    host: str
    port: int
    advertised_host: str | None = None
    ssl_context: ssl.SSLContext | None = None
    enabled_mechanisms: tuple[str, ...] = ()
    plain_users: Mapping[str, str] = field(default_factory=dict)
    # connections.max.reauth.ms by mechanism (KIP-368; 0: sessions do not expire)
    max_reauth_ms: Mapping[str, int] = field(default_factory=dict)
    # sasl.server.max.receive.size: the largest frame before authentication (Kafka's 512 KiB)
    sasl_max_receive_size: int = DEFAULT_SASL_MAX_RECEIVE_SIZE
    oauthbearer: UnsecuredValidatorOptions = DEFAULT_OPTIONS

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")


def listener_lookup(configs: Mapping[str, str], listener: str) -> Callable[[str], str | None]:
    """Kafka's per-listener override: ``listener.name.<l>.<key>``, else ``<key>``."""
    prefix = f"listener.name.{listener.lower()}."

    def get(key: str) -> str | None:
        value = configs.get(prefix + key)
        return value if value is not None else configs.get(key)

    return get


def _tls_lookup(
    configs: Mapping[str, str], listener: str, protocol: str
) -> Callable[[str], str | None]:
    """The listener's lookup for its TLS context. On SASL_SSL, ``ssl.client.auth`` counts
    only with the listener's prefix (KIP-684): the broker-wide one is for SSL listeners,
    so SASL clients without a certificate are not cut off in the handshake."""
    get = listener_lookup(configs, listener)
    if protocol != "SASL_SSL":
        return get
    prefixed = f"listener.name.{listener.lower()}.{CLIENT_AUTH}"

    def lookup(key: str) -> str | None:
        return configs.get(prefixed) if key == CLIENT_AUTH else get(key)

    return lookup


def security_listeners(config: BrokerConfig) -> list[ListenerConfig]:
    """The broker's listeners other than the primary PLAINTEXT one, checked whole."""
    if not config.listeners:
        return []
    primary = config.client_listener()
    protocols = security_protocol_map(config.listener_security_protocol_map)
    controllers = {n.strip().upper() for n in (config.controller_listener_names or "").split(",")}
    advertised: dict[str, ListenerEndpoint] = {}
    if config.advertised_listeners:
        advertised = {
            e.name: e for e in parse_listeners(config.advertised_listeners, "advertised.listeners")
        }
    configs = dict(config.security_configs)
    result = []
    for entry in parse_listeners(config.listeners):
        if entry.name in controllers or (primary is not None and entry.name == primary.name):
            continue
        protocol = protocols.get(entry.name, entry.name)
        if protocol not in SECURITY_PROTOCOLS:
            raise ListenerConfigError(
                f"listener {entry.name}: no security protocol (add it to "
                f"listener.security.protocol.map; one of {', '.join(SECURITY_PROTOCOLS)})"
            )
        adv = advertised.get(entry.name)
        result.append(_listener(entry, protocol, adv.host or None if adv else None, configs))
    return result


def _listener(
    entry: ListenerEndpoint, protocol: str, advertised: str | None, configs: Mapping[str, str]
) -> ListenerConfig:
    get = listener_lookup(configs, entry.name)
    context = None
    if protocol in ("SSL", "SASL_SSL"):
        try:
            context = build_server_ssl_context(_tls_lookup(configs, entry.name, protocol))
        except SslConfigError as exc:
            raise ListenerConfigError(f"listener {entry.name}: {exc}") from None
    mechanisms: tuple[str, ...] = ()
    users: dict[str, str] = {}
    oauth = DEFAULT_OPTIONS
    if protocol.startswith("SASL_"):
        raw = get("sasl.enabled.mechanisms") or "GSSAPI"
        mechanisms = tuple(m.strip().upper() for m in raw.split(",") if m.strip())
        unserved = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
        if unserved or not mechanisms:
            raise ListenerConfigError(
                f"listener {entry.name}: sasl.enabled.mechanisms={raw}: minikafka serves "
                f"{', '.join(SUPPORTED_MECHANISMS)}"
            )
        if PLAIN in mechanisms:
            users = _plain_users(configs, entry.name)
        if OAUTHBEARER in mechanisms:
            oauth = _oauthbearer_options(configs, entry.name)
    return ListenerConfig(
        entry.name,
        protocol,
        entry.host,
        entry.port,
        advertised,
        context,
        mechanisms,
        users,
        {m: _max_reauth_ms(configs, entry.name, m) for m in mechanisms},
        _int_config(get, MAX_RECEIVE, DEFAULT_SASL_MAX_RECEIVE_SIZE, 1),
        oauth,
    )


def _oauthbearer_options(configs: Mapping[str, str], listener: str) -> UnsecuredValidatorOptions:
    key = f"listener.name.{listener.lower()}.oauthbearer.sasl.jaas.config"
    text = configs.get(key)
    if text is None:
        return DEFAULT_OPTIONS
    try:
        return UnsecuredValidatorOptions.from_jaas_options(parse_jaas_config(text).options)
    except (JaasConfigError, ValueError) as exc:
        raise ListenerConfigError(f"{key}: {exc}") from None


def _int_config(get: Callable[[str], str | None], key: str, default: int, low: int) -> int:
    raw = get(key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ListenerConfigError(f"{key}={raw!r} is not a number") from None
    if value < low:
        raise ListenerConfigError(f"{key}={value} must be at least {low}")
    return value


def _max_reauth_ms(configs: Mapping[str, str], listener: str, mechanism: str) -> int:
    """``listener.name.<l>.<mechanism>.connections.max.reauth.ms``, else the broker's."""
    key = f"listener.name.{listener.lower()}.{mechanism.lower()}.{MAX_REAUTH}"
    raw = configs.get(key, configs.get(MAX_REAUTH, "0"))
    try:
        value = int(raw)
    except ValueError:
        raise ListenerConfigError(f"{key}: {raw!r} is not a number of milliseconds") from None
    if value < 0:
        raise ListenerConfigError(f"{MAX_REAUTH}={value} must be at least 0")
    return value


def _plain_users(configs: Mapping[str, str], listener: str) -> dict[str, str]:
    key = f"listener.name.{listener.lower()}.plain.sasl.jaas.config"
    text = configs.get(key)
    if text is None:
        raise ListenerConfigError(f"listener {listener} enables PLAIN but {key} is not set")
    try:
        entry = parse_jaas_config(text)
    except JaasConfigError as exc:
        raise ListenerConfigError(f"{key}: {exc}") from None
    if entry.login_module_name != PLAIN_LOGIN_MODULE:
        raise ListenerConfigError(f"{key}: expected {PLAIN_LOGIN_MODULE}")
    return plain_users(entry)


def inter_broker_client(
    config: BrokerConfig, listeners: list[ListenerConfig], random_bytes: Callable[[int], bytes]
) -> InterBrokerClient | None:
    """How this broker connects to the others when ``inter.broker.listener.name`` is a
    TLS/SASL listener (None: the PLAINTEXT one): TLS with the listener's stores, SASL with
    ``sasl.mechanism.inter.broker.protocol`` as the listener JAAS entry's ``username``."""
    name = (config.inter_broker_listener_name or "").strip().upper()
    listener = next((entry for entry in listeners if entry.name == name), None)
    if listener is None:
        return None
    configs = dict(config.security_configs)
    get = listener_lookup(configs, listener.name)
    context = None
    if listener.uses_tls:
        try:
            context = build_client_ssl_context(get)
        except SslConfigError as exc:
            raise ListenerConfigError(f"inter-broker listener {name}: {exc}") from None
    if not listener.uses_sasl:
        return InterBrokerClient(name, context, None, random_bytes)
    mechanism = (configs.get(INTER_BROKER_MECHANISM) or "GSSAPI").strip().upper()
    if mechanism not in listener.enabled_mechanisms or mechanism == OAUTHBEARER:
        raise ListenerConfigError(
            f"{INTER_BROKER_MECHANISM}={mechanism}: the inter-broker listener {name} must "
            "enable it, and minikafka's brokers log in with PLAIN or SCRAM"
        )
    key = f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config"
    try:
        options = parse_jaas_config(configs.get(key, "")).options
    except JaasConfigError as exc:
        raise ListenerConfigError(f"{key} (the brokers' own login): {exc}") from None
    if "username" not in options or "password" not in options:
        raise ListenerConfigError(f"{key}: the brokers log in with its username and password")
    return InterBrokerClient(
        name, context, mechanism, random_bytes, options["username"], options["password"]
    )


class ChannelBuilder:
    """What a new connection on one listener gets: its principal and its authenticator."""

    def __init__(
        self,
        listener: ListenerConfig,
        credentials: ScramCredentialStore,
        wall_clock: Clock,
        random_bytes: Callable[[int], bytes],
        tokens: DelegationTokenManager | None = None,
    ) -> None:
        self.listener = listener
        self._credentials = credentials
        self._tokens = tokens  # delegation tokens' SCRAM logins (tokenauth=true)
        self._wall_clock = wall_clock  # OAUTHBEARER's exp is epoch time
        self._random_bytes = random_bytes

    @property
    def listener_name(self) -> str:
        return self.listener.name

    @property
    def security_protocol(self) -> str:
        return self.listener.security_protocol

    def principal(self, ssl_object: ssl.SSLObject | None) -> KafkaPrincipal:
        """The principal before SASL: the client certificate's on SSL, else ANONYMOUS."""
        if self.listener.security_protocol == "SSL":
            return ssl_principal(ssl_object)
        return ANONYMOUS

    def new_authenticator(
        self, previous: SaslServerAuthenticator | None = None
    ) -> SaslServerAuthenticator | None:
        """A connection's authenticator; ``previous``: the session it re-authenticates."""
        if not self.listener.uses_sasl:
            return None
        return SaslServerAuthenticator(
            self.listener.enabled_mechanisms,
            self._new_server,
            self._wall_clock.now_ms,
            self.listener.max_reauth_ms,
            previous,
        )

    def _new_server(self, mechanism: str) -> SaslServer:
        if mechanism == PLAIN:
            return PlainSaslServer(self.listener.plain_users)
        if mechanism in SCRAM_MECHANISMS:
            tokens = self._tokens.login if self._tokens is not None else None
            return ScramSaslServer(
                mechanism, self._credentials.credential, self._random_bytes, tokens
            )
        if mechanism == OAUTHBEARER:
            return OAuthBearerSaslServer(self._wall_clock.now_ms, self.listener.oauthbearer)
        raise ValueError(f"unserved mechanism {mechanism}")  # checked at start
