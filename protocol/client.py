"""One Kafka client connection, sans-IO: requests out, bytes in, responses paired.

Everything in the project that speaks Kafka *as a client* -- the followers' fetchers,
the replay, the workload, the tests' raw client -- sits on ``ClientConnection`` and
adds only a thin shell that moves bytes (an asyncio stream, a blocking socket). Like
h11, it never touches a socket and never waits: the shell asks it for the bytes of a
request and writes them, and hands it whatever it reads, getting back the responses
that are now complete. So the rules below are one piece of code, tested without a
network, whatever the shell.

Theory of operation
-------------------

*Correlation ids.* Each ``send`` takes the connection's next correlation id:
0, 1, 2, ... per connection (after 2**31 - 1 it wraps to 0, as an int32 must). A shell
that reconnects makes a new ``ClientConnection``, so ids restart with the socket.

*Encoding.* ``send(api_key, api_version, body)`` frames the request with
``protocol.codec.encode_request``: length, request header v1 or v2 (v2 exactly when
that version of the API is flexible), the client id given at construction, kio's body.
``send_frame(frame)`` takes a request that is already encoded (a captured frame, length
prefix removed, as the replay keeps them) and only replaces its correlation id, which
sits at the same offset in every request header version; api key and version are read
from the frame, the body is never decoded.

*In flight, in order.* Kafka answers the requests of one connection in the order they
were sent (its broker holds back a later response until the earlier ones are out), so
a request that expects an answer is appended to the in-flight queue, and a response
must carry the correlation id of the *oldest* request in flight. Anything else -- a
response with nothing in flight, or another id -- means request and response streams
have lost each other: ``UnexpectedResponse`` (a ``ProtocolError``), as Kafka's
``NetworkClient`` fails the connection with "Correlation id for response does not
match request".

*acks=0.* A Produce with ``acks=0`` gets no response at all, so it never enters the
queue; later answers are still paired by order. ``send`` sees ``acks`` in the body;
``send_frame`` does not decode, so its caller says ``expect_response``.

*Responses, decoded lazily.* ``receive`` cuts frames with a ``FrameDecoder``, pairs
each with its request, and returns ``Response`` objects holding the raw frame and the
request's api key and version. ``Response.body`` decodes on first use (response header
v0 or v1 from the API's flexible versions, and v0 always for ApiVersions, as
``protocol.codec`` does) and keeps the result. Pairing costs one 4-byte read per
frame, so a shell can take the time of arrival before paying for a decode, or never
decode at all. A body that does not decode raises ``MalformedResponse`` from ``body``,
not from ``receive``: the stream itself is still in step.

*ApiVersions fallback.* A broker that lacks the ApiVersions version asked for answers
with a v0 body (UNSUPPORTED_VERSION and its ranges). As in Kafka's
``ApiVersionsResponse.parse``, a body that does not decode at the version asked (or a
version kio has no schema of) is decoded again as v0.

*Failure is final.* ``receive`` is all or nothing: if any frame in the data is bad
(framing error, unexpected correlation id, a frame too short for one), it raises, no
response of that call is returned, the in-flight queue is left as it was, and the
connection is closed. ``connection_lost()`` (the shell saw EOF or an error) closes it
too and returns the requests that will never be answered, oldest first. A closed
connection refuses ``send``, ``send_frame`` and ``receive`` with ``ConnectionClosed``.

Differences from Kafka's client: no in-flight limit here (Kafka's
``max.in.flight.requests.per.connection`` is the caller's policy; the replay pipelines
whatever its capture did), and the response size is bounded by ``max_frame_bytes``
(default 100 MiB, the broker's ``socket.request.max.bytes``) where Kafka's client reads
any size, so a garbled length cannot make us buffer 2 GiB.
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass
from typing import Final

from kio.static.protocol import RequestPayload, ResponsePayload

from protocol.api_registry import API_VERSIONS_KEY
from protocol.codec import decode_response, encode_request
from protocol.errors import ConnectionClosed, MalformedResponse, ProtocolError, UnexpectedResponse
from protocol.frames import DEFAULT_MAX_FRAME_BYTES, FrameDecoder

__all__ = ("ClientConnection", "InFlightRequest", "Outgoing", "Response")

PRODUCE: Final = 0
MAX_CORRELATION_ID: Final = 0x7FFF_FFFF

_INT16_PAIR = struct.Struct(">hh")  # api key, api version: the start of every request
_INT32 = struct.Struct(">i")
_CORRELATION_OFFSET: Final = 4 + 4  # length prefix, api key, api version


@dataclass(frozen=True, slots=True)
class Outgoing:
    """What ``send`` produced: the bytes to write (one whole frame, length prefix
    included) and the correlation id they carry."""

    correlation_id: int
    data: bytes
    expects_response: bool


@dataclass(frozen=True, slots=True)
class InFlightRequest:
    """A request sent and not answered yet (Kafka's in-flight request)."""

    correlation_id: int
    api_key: int
    api_version: int


class Response:
    """One response, paired with the request it answers.

    ``frame`` is the response as received, length prefix removed. ``body`` is kio's
    response object, decoded on first access and kept; it raises ``MalformedResponse``
    (or ``UnsupportedVersion``) when the frame does not decode.
    """

    __slots__ = ("_body", "api_key", "api_version", "correlation_id", "frame")

    def __init__(self, correlation_id: int, api_key: int, api_version: int, frame: bytes) -> None:
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.api_version = api_version
        self.frame = frame
        self._body: ResponsePayload | None = None

    @property
    def body(self) -> ResponsePayload:
        body = self._body
        if body is None:
            body = self._body = _decode_body(self.api_key, self.api_version, self.frame)
        return body

    def __repr__(self) -> str:
        return (
            f"Response(correlation_id={self.correlation_id}, api_key={self.api_key}, "
            f"api_version={self.api_version}, {len(self.frame)} bytes)"
        )


def _decode_body(api_key: int, api_version: int, frame: bytes) -> ResponsePayload:
    try:
        return decode_response(api_key, api_version, frame)[1]
    except ProtocolError as error:
        if api_key != API_VERSIONS_KEY or api_version == 0:
            raise
        try:  # Kafka's fallback: the broker may have answered with v0 (see module doc)
            return decode_response(API_VERSIONS_KEY, 0, frame)[1]
        except ProtocolError:
            raise error from None


class ClientConnection:
    """The client side of one Kafka connection; see the module docstring."""

    __slots__ = ("_closed", "_decoder", "_in_flight", "_next_correlation_id", "client_id")

    def __init__(
        self, client_id: str | None = None, *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    ) -> None:
        self.client_id = client_id
        self._decoder = FrameDecoder(max_frame_bytes)
        self._in_flight: deque[InFlightRequest] = deque()
        self._next_correlation_id = 0
        self._closed = False

    @property
    def closed(self) -> bool:
        """True after ``connection_lost()`` or once the peer broke the protocol."""
        return self._closed

    @property
    def in_flight(self) -> int:
        """Requests sent whose response has not been received yet."""
        return len(self._in_flight)

    @property
    def next_correlation_id(self) -> int:
        """The correlation id the next request will carry."""
        return self._next_correlation_id

    # -- sending -------------------------------------------------------------------------

    def send(
        self,
        api_key: int,
        api_version: int,
        body: RequestPayload,
        *,
        expect_response: bool | None = None,
    ) -> Outgoing:
        """Encode a request with the next correlation id.

        ``expect_response`` defaults to True, except for a Produce whose ``acks`` is 0.
        Raises ``ValueError`` when ``body`` is not a request of that api key and version.
        """
        self._check_open()
        correlation_id = self._next_correlation_id
        data = encode_request(api_key, api_version, correlation_id, self.client_id, body)
        if expect_response is None:
            expect_response = not (api_key == PRODUCE and int(getattr(body, "acks", -1)) == 0)
        return self._sent(correlation_id, api_key, api_version, data, expect_response)

    def send_frame(
        self, frame: bytes | bytearray | memoryview, *, expect_response: bool
    ) -> Outgoing:
        """Send an already encoded request (length prefix removed) under the next
        correlation id; nothing else of it changes. The caller says whether it expects
        a response (False only for an acks=0 Produce)."""
        self._check_open()
        if len(frame) < 8:
            raise ValueError(f"a request frame of {len(frame)} bytes has no header")
        api_key, api_version = _INT16_PAIR.unpack_from(frame, 0)
        correlation_id = self._next_correlation_id
        out = bytearray(_INT32.pack(len(frame)))
        out += frame
        _INT32.pack_into(out, _CORRELATION_OFFSET, correlation_id)
        return self._sent(correlation_id, api_key, api_version, bytes(out), expect_response)

    def _sent(
        self, correlation_id: int, api_key: int, api_version: int, data: bytes, expects: bool
    ) -> Outgoing:
        self._next_correlation_id = (
            0 if correlation_id >= MAX_CORRELATION_ID else correlation_id + 1
        )
        if expects:
            self._in_flight.append(InFlightRequest(correlation_id, api_key, api_version))
        return Outgoing(correlation_id, data, expects)

    # -- receiving -----------------------------------------------------------------------

    def receive(self, data: bytes | bytearray | memoryview) -> list[Response]:
        """Take bytes read from the peer; return the responses now complete, in order.

        Raises a ``ProtocolError`` (and closes the connection, returning nothing of this
        call) on a framing error, a frame without a correlation id, or a response that
        is not the answer to the oldest request in flight.
        """
        self._check_open()
        try:
            frames = self._decoder.feed(data)
        except ProtocolError:
            self._closed = True
            raise
        if not frames:
            return []
        in_flight = self._in_flight
        responses: list[Response] = []
        for index, frame in enumerate(frames):
            if len(frame) < 4:
                self._closed = True
                raise MalformedResponse(f"response of {len(frame)} bytes has no correlation id")
            (correlation_id,) = _INT32.unpack_from(frame, 0)
            if index >= len(in_flight):
                self._closed = True
                raise UnexpectedResponse(
                    f"response with correlation id {correlation_id} but no request in flight"
                )
            request = in_flight[index]
            if correlation_id != request.correlation_id:
                self._closed = True
                raise UnexpectedResponse(
                    f"correlation id {correlation_id} for response does not match "
                    f"request {request.correlation_id} (the oldest in flight)"
                )
            responses.append(Response(correlation_id, request.api_key, request.api_version, frame))
        for _ in responses:
            in_flight.popleft()
        return responses

    def connection_lost(self) -> list[InFlightRequest]:
        """The transport is gone: close, and return the requests that will never be
        answered, oldest first. Calling it again returns an empty list."""
        self._closed = True
        lost = list(self._in_flight)
        self._in_flight.clear()
        return lost

    def _check_open(self) -> None:
        if self._closed:
            raise ConnectionClosed("the connection is closed")
