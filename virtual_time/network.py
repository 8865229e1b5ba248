"""An in-memory network for the simulated loop: listeners, connections, latency, faults.

What it stands in for. asyncio code reaches the network through two calls, the loop's
`create_server` and `create_connection` (aiokafka, `asyncio.open_connection` and our broker
all use them), and then only through the `asyncio.Transport` it is handed. `SimNetwork`
implements those two calls and `SimTransport` implements the transport over Python objects:
``write(data)`` schedules ``data_received(data)`` on the peer's protocol at ``now + latency``
of that link, as a timer of the simulated loop. Nothing is polled; delivery is a timer like
any other, so the loop's virtual clock jumps over network latency as it jumps over a
``sleep``.

Kept from TCP: bytes of one direction arrive in order (a later write never overtakes an earlier
one, whatever latency is drawn), a closed or reset connection tells the peer after the
latency, a paused reader (`pause_reading`, the broker's muted channel) holds what arrives
until it resumes, a connection to a port nobody listens on is refused, the acceptor learns of
a connection half a round trip before the connector does.

Bandwidth: each direction of a connection sends one message after another at
``LatencyModel.bandwidth_bytes_per_s`` (0: unlimited), so a large response holds up what is
behind it, as on a link. Not modelled: socket buffers (a write never blocks), Nagle, partial
writes, half-close (`can_write_eof()` is False).

Nodes. Every message travels from one node to another. A listener port belongs to the node
`name_port` gave it (``port-N`` otherwise); a connection comes from the node its opener runs
in (`client_node`), or, opened outside one, from the node `name_client_ids` finds for the
client id of its first request — how a simulated cluster tells a broker's own connections
(followers, the transaction marker sender, the share persister: each names its broker in its
client id) from its clients', as Kafka's request log does.

Faults, all seeded or scheduled, none of them losing a byte (TCP retransmits): per listener
port a `LinkFaults` — *held* (traffic to and from it waits until released: a partition that
delivers late), extra delay, loss (a message lost on the wire arrives after a retransmission
timeout, doubling for each loss in a row) — and connection resets; per node: an *isolated*
client (both directions wait) and *cuts*, one way (``cut(a, b)``: what ``a`` sends ``b``
waits) or both: a partition between two brokers that leaves their clients alone.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import random
import struct
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

_EOF = object()  # sentinel in a transport's inbox: the peer closed

# Who opens a connection: a simulated client names itself by running in `client_node(name)`
# (the tasks it starts inherit the name), so a fault can single it out — `isolate`.
_CLIENT_NODE: contextvars.ContextVar[str] = contextvars.ContextVar("sim_node", default="client")
_CLIENT_ID = struct.Struct(">h")


@contextmanager
def client_node(name: str) -> Iterator[None]:
    """Connections opened in this context (and by tasks started in it) belong to ``name``."""
    token = _CLIENT_NODE.set(name)
    try:
        yield
    finally:
        _CLIENT_NODE.reset(token)


@dataclass(slots=True)
class LatencyModel:
    """One-way latency per message: ``base_s`` plus a seeded uniform jitter up to ``jitter_s``."""

    base_s: float = 0.0002
    jitter_s: float = 0.0001
    #: Each direction of a connection sends at this rate (0: unlimited).
    bandwidth_bytes_per_s: float = 0.0

    def draw(self, rng: random.Random) -> float:
        return self.base_s + (rng.random() * self.jitter_s if self.jitter_s > 0 else 0.0)

    def transmit_s(self, size: int) -> float:
        """How long ``size`` bytes occupy the link."""
        return size / self.bandwidth_bytes_per_s if self.bandwidth_bytes_per_s > 0 else 0.0


@dataclass(slots=True)
class LinkFaults:
    """Faults on every connection of one listener port (both directions)."""

    held: bool = False
    extra_delay_s: float = 0.0
    #: The chance that a message is lost on the wire and retransmitted after `RTO_S`.
    loss_rate: float = 0.0


#: TCP's minimum retransmission timeout on Linux (200 ms): what a lost message costs.
RTO_S = 0.2
#: A default node: whoever opened a connection outside `client_node`.
ANONYMOUS_NODE = "client"


_Message = tuple[Callable[..., None], tuple[Any, ...]]


@dataclass(slots=True, eq=False)
class _Link:
    """One direction of one connection: its in-order delivery horizon and held messages."""

    server_port: int
    src: str
    dst: str
    serial: int
    last_arrival: float = 0.0
    busy_until: float = 0.0  # when the link has sent what it was given (bandwidth)
    in_flight: deque[_Message] = field(default_factory=deque)
    held: deque[_Message] = field(default_factory=deque)
    #: The other direction of the same connection; None once the source is known.
    reverse: _Link | None = None
    #: Delivery timers of messages a hold took off the wire: each fires for nothing.
    stale_timers: int = 0
    #: Its connection is gone; kept only while it holds messages.
    forgotten: bool = False


class _SimSocket:
    """Just enough of a socket for callers that ask a server which port it got."""

    def __init__(self, address: tuple[str, int]) -> None:
        self._address = address

    def getsockname(self) -> tuple[str, int]:
        return self._address


class SimServer(asyncio.AbstractServer):
    """A listener on the in-memory network (what `create_server` returns)."""

    def __init__(
        self,
        network: SimNetwork,
        address: tuple[str, int],
        protocol_factory: Callable[[], asyncio.BaseProtocol],
    ) -> None:
        self._network = network
        self.address = address
        self.protocol_factory = protocol_factory
        self.sockets = [_SimSocket(address)]
        self._serving = True

    def close(self) -> None:
        if self._serving:
            self._serving = False
            self._network._listeners.pop(self.address, None)

    async def wait_closed(self) -> None:
        return None

    def is_serving(self) -> bool:
        return self._serving

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._network.loop

    async def start_serving(self) -> None:
        return None

    async def serve_forever(self) -> None:
        raise NotImplementedError("the simulation drives its servers itself")


class SimTransport(asyncio.Transport):
    """One end of an in-memory connection; see the module docstring for what it keeps."""

    def __init__(
        self,
        network: SimNetwork,
        protocol: asyncio.BaseProtocol,
        sockname: tuple[str, int],
        peername: tuple[str, int],
        outgoing: _Link,
    ) -> None:
        super().__init__()
        self._network = network
        self._protocol = protocol
        self._extra = {"sockname": sockname, "peername": peername, "socket": None}
        self._outgoing = outgoing
        self.peer: SimTransport | None = None
        self._inbox: deque[object] = deque()
        self._made = False
        self._paused = False
        self._closing = False
        self._lost = False
        self.on_lost: Callable[[SimTransport], None] | None = None

    # -- asyncio.Transport -------------------------------------------------------------

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._extra.get(name, default)

    def is_closing(self) -> bool:
        return self._closing

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._protocol = protocol

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._protocol

    def is_reading(self) -> bool:
        return not self._paused and not self._closing

    def pause_reading(self) -> None:
        self._paused = True

    def resume_reading(self) -> None:
        if self._paused:
            self._paused = False
            self._network.loop.call_soon(self._drain_inbox)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        return None

    def get_write_buffer_size(self) -> int:
        return 0

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return (0, 0)

    def can_write_eof(self) -> bool:
        return False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing or not data:
            return
        peer = self.peer
        if peer is not None:
            payload = bytes(data)
            if self._outgoing.reverse is not None:
                self._network._learn_source(self._outgoing, payload)
            self._network._send(self._outgoing, peer._receive, payload)

    def writelines(self, list_of_data: Any) -> None:
        self.write(b"".join(list_of_data))

    def close(self) -> None:
        self._shut(None)

    def abort(self) -> None:
        self._shut(ConnectionResetError("connection reset by peer"))

    # -- the in-memory side ------------------------------------------------------------

    def _shut(self, exc: Exception | None) -> None:
        if self._closing:
            return
        self._closing = True
        peer = self.peer
        if peer is not None:
            self._network._send(self._outgoing, peer._receive_close, exc)
        self._network.loop.call_soon(self._lose, None)

    def _connection_made(self) -> None:
        if self._closing:
            return
        self._made = True
        self._protocol.connection_made(self)
        self._drain_inbox()

    def _receive(self, data: bytes) -> None:
        if not self._inbox and self._made and not (self._paused or self._lost or self._closing):
            self._protocol.data_received(data)  # type: ignore[attr-defined]
            return  # what `_drain_inbox` would do, without the queue: the usual case
        self._inbox.append(data)
        self._drain_inbox()

    def _receive_close(self, exc: Exception | None) -> None:
        self._inbox.append(exc if exc is not None else _EOF)
        self._drain_inbox()

    def _drain_inbox(self) -> None:
        while self._inbox and self._made and not self._paused and not self._lost:
            item = self._inbox.popleft()
            if isinstance(item, bytes):
                if not self._closing:
                    self._protocol.data_received(item)  # type: ignore[attr-defined]
                continue
            self._closing = True
            self._lose(None if item is _EOF else item)  # type: ignore[arg-type]

    def _lose(self, exc: Exception | None) -> None:
        if self._lost:
            return
        self._lost = True
        self._inbox.clear()
        if self.on_lost is not None:
            self.on_lost(self)
        if self._made:
            self._protocol.connection_lost(exc)


class SimNetwork:
    """Listeners and connections of one simulated loop, with seeded latency and faults."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        rng: random.Random,
        latency: LatencyModel | None = None,
    ) -> None:
        self.loop = loop
        self.rng = rng
        self.latency = latency or LatencyModel()
        self._listeners: dict[tuple[str, int], SimServer] = {}
        self._server_ports = itertools.count(9092)
        self._client_ports = itertools.count(50000)
        self._serials = itertools.count()
        self._faults: dict[int, LinkFaults] = {}
        self._links: dict[int, set[_Link]] = {}
        # Per port, the accepted ends in the order they connected (a set would iterate by
        # address, and `reset_connections` aborts them in its order).
        self._accepted: dict[int, dict[SimTransport, None]] = {}
        self._isolated: set[str] = set()
        self._cuts: set[tuple[str, str]] = set()
        self._holds: set[tuple[str, str]] = set()
        self._port_nodes: dict[int, str] = {}
        self._client_id_nodes: Callable[[str], str | None] = lambda _client_id: None
        self.messages_delivered = 0

    # -- nodes -------------------------------------------------------------------------

    def name_port(self, port: int, node: str) -> None:
        """Connections to ``port`` reach ``node`` (a broker's listener: ``broker-1``)."""
        self._port_nodes[port] = node

    def name_client_ids(self, node_of: Callable[[str], str | None]) -> None:
        """How to tell, from the client id of its first request, which node opened a
        connection outside `client_node` (None: it stays `ANONYMOUS_NODE`)."""
        self._client_id_nodes = node_of

    def node_of_port(self, port: int) -> str:
        return self._port_nodes.get(port, f"port-{port}")

    def _learn_source(self, link: _Link, frame: bytes) -> None:
        """Name an anonymous connection's source from its first request's client id
        (Kafka's request header: size, api key, version, correlation id, client id)."""
        reverse, link.reverse = link.reverse, None
        if len(frame) < 14:
            return
        (length,) = _CLIENT_ID.unpack_from(frame, 12)
        if length < 0 or len(frame) < 14 + length:
            return
        node = self._client_id_nodes(frame[14 : 14 + length].decode("utf-8", "replace"))
        if node is not None and reverse is not None:
            link.src = reverse.dst = node

    # -- what the loop delegates -------------------------------------------------------

    def create_server(
        self, protocol_factory: Callable[[], asyncio.BaseProtocol], host: str, port: int
    ) -> SimServer:
        if port == 0:
            port = next(p for p in self._server_ports if (host, p) not in self._listeners)
        address = (host, port)
        if address in self._listeners:
            raise OSError(98, f"[Errno 98] address already in use: {host}:{port}")
        server = SimServer(self, address, protocol_factory)
        self._listeners[address] = server
        return server

    async def create_connection(
        self, protocol_factory: Callable[[], asyncio.BaseProtocol], host: str, port: int
    ) -> tuple[SimTransport, asyncio.BaseProtocol]:
        one_way = self.latency.draw(self.rng)
        server = self._listeners.get((host, port))
        if server is None or not server.is_serving():
            await asyncio.sleep(2 * one_way)
            raise ConnectionRefusedError(111, f"Connect call failed ('{host}', {port})")
        client_address = ("127.0.0.1", next(self._client_ports))
        node, server_node = _CLIENT_NODE.get(), self.node_of_port(port)
        to_server = _Link(port, node, server_node, next(self._serials))
        to_client = _Link(port, server_node, node, next(self._serials))
        if node == ANONYMOUS_NODE:
            to_server.reverse = to_client  # named by its first request
        client_protocol = protocol_factory()
        server_protocol = server.protocol_factory()
        client = SimTransport(self, client_protocol, client_address, (host, port), to_server)
        accepted = SimTransport(self, server_protocol, (host, port), client_address, to_client)
        client.peer, accepted.peer = accepted, client
        self._accepted.setdefault(port, {})[accepted] = None
        self._links.setdefault(port, set()).update((to_server, to_client))

        def forget(transport: SimTransport) -> None:
            # A link that still holds messages (the close, for an isolated client) stays
            # until a heal sends them on; `_resend_held` drops it then.
            self._accepted[port].pop(transport, None)
            for link in (to_server, to_client):
                link.forgotten = True
                if not link.held:
                    self._links[port].discard(link)

        accepted.on_lost = forget
        self._send(to_server, accepted._connection_made)
        await asyncio.sleep(2 * one_way)
        client._connection_made()
        return client, client_protocol

    # -- delivery ----------------------------------------------------------------------

    def _send(self, link: _Link, deliver: Callable[..., None], *args: Any) -> None:
        """Deliver ``deliver(*args)`` after this link's latency, in order, unless held.

        Each timer delivers the *head* of the link's queue, not the message it was set for:
        two messages due at one instant are a tie the loop orders by seed, and this keeps
        them in the order they were sent whatever that order is."""
        faults = self._faults.get(link.server_port)
        if (faults is not None or self._isolated or self._cuts or self._holds) and self._blocked(
            link, faults
        ):
            link.held.append((deliver, args))
            return
        delay = self.latency.draw(self.rng)
        if faults is not None:
            delay += faults.extra_delay_s + self._retransmissions_s(faults.loss_rate)
        sent = self.loop.time()
        if self.latency.bandwidth_bytes_per_s > 0 and args and isinstance(args[0], bytes):
            sent = max(sent, link.busy_until) + self.latency.transmit_s(len(args[0]))
            link.busy_until = sent
        arrival = max(sent + delay, link.last_arrival)
        link.last_arrival = arrival
        link.in_flight.append((deliver, args))
        self.loop.call_at(arrival, self._deliver_head, link)

    def _blocked(self, link: _Link, faults: LinkFaults | None) -> bool:
        return (
            (faults is not None and faults.held)
            or link.src in self._isolated
            or link.dst in self._isolated
            or (link.src, link.dst) in self._cuts
            or (link.src, link.dst) in self._holds
        )

    def _retransmissions_s(self, loss_rate: float) -> float:
        """The retransmission timeouts of a message lost ``k`` times in a row (seeded)."""
        waited, rto = 0.0, RTO_S
        while loss_rate > 0 and self.rng.random() < loss_rate and rto < 60:
            waited += rto
            rto *= 2
        return waited

    def _deliver_head(self, link: _Link) -> None:
        if link.stale_timers:  # a hold took this timer's message (or an earlier one) off
            link.stale_timers -= 1
            return
        deliver, args = link.in_flight.popleft()
        self.messages_delivered += 1
        deliver(*args)

    # -- faults ------------------------------------------------------------------------

    def faults(self, port: int) -> LinkFaults:
        """The faults of every connection to ``port`` (created empty on first use)."""
        return self._faults.setdefault(port, LinkFaults())

    def hold(self, port: int) -> None:
        """Partition the listener on ``port`` from everyone: traffic waits, both ways."""
        self.faults(port).held = True

    def release(self, port: int) -> None:
        """Heal the partition: what waited is delivered, in order, after the link latency."""
        self.faults(port).held = False
        self._resend_held(self._links.get(port, ()))

    def isolate(self, node: str) -> None:
        """Cut client ``node`` off from every broker: a process that froze or lost its network
        (its connections stay open; nothing it sends arrives, nothing reaches it)."""
        self._isolated.add(node)

    def rejoin(self, node: str) -> None:
        """Undo `isolate`: what waited is delivered, in order."""
        self._isolated.discard(node)
        self._resend_held(link for links in self._links.values() for link in links)

    def cut(self, src: str, dst: str) -> None:
        """What node ``src`` sends node ``dst`` waits (one way); `heal` delivers it."""
        self._cuts.add((src, dst))

    def heal(self, src: str, dst: str) -> None:
        self._cuts.discard((src, dst))
        self._resend_held(link for links in self._links.values() for link in links)

    def hold_between(self, a: str, b: str) -> None:
        """turmoil's hold: every message between nodes ``a`` and ``b`` (both ways) waits,
        those already on the wire too, until `release_between`."""
        self._holds.update(((a, b), (b, a)))
        for link in self._all_links():
            if (link.src, link.dst) in self._holds and link.in_flight:
                link.held = deque([*link.in_flight, *link.held])
                link.stale_timers += len(link.in_flight)
                link.in_flight.clear()

    def release_between(self, a: str, b: str) -> None:
        """Let what `hold_between` held go at once: each direction's messages arrive at one
        instant (one latency after now), in the order they were sent."""
        self._holds.difference_update(((a, b), (b, a)))
        for link in self._all_links():
            if (link.src, link.dst) not in ((a, b), (b, a)) or not link.held:
                continue
            if self._blocked(link, self._faults.get(link.server_port)):
                continue  # another fault still holds it; its heal delivers
            arrival = max(self.loop.time() + self.latency.draw(self.rng), link.last_arrival)
            link.last_arrival = arrival
            waiting, link.held = link.held, deque()
            for message in waiting:
                link.in_flight.append(message)
                self.loop.call_at(arrival, self._deliver_head, link)

    def nodes(self) -> list[str]:
        """Every node with an open connection, sorted (what faults pick their links from)."""
        return sorted({node for link in self._all_links() for node in (link.src, link.dst)})

    def _all_links(self) -> list[_Link]:
        return sorted(
            (link for links in self._links.values() for link in links),
            key=lambda link: link.serial,
        )

    def _resend_held(self, links: Iterable[_Link]) -> None:
        for link in sorted(links, key=lambda link: link.serial):
            waiting, link.held = link.held, deque()
            for deliver, args in waiting:
                self._send(link, deliver, *args)
            if link.forgotten and not link.held:
                self._links[link.server_port].discard(link)

    def reset_connections(self, port: int) -> None:
        """Reset every connection to ``port``: the listener's side aborts, the client learns
        of it after the latency (ConnectionResetError), as after a broker's crash."""
        for transport in list(self._accepted.get(port, {})):
            transport.abort()
