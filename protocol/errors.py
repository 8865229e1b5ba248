"""Errors of the wire layer.

Two different kinds of error live here, and they must not be confused:

* ``ErrorCode`` (re-exported from kio) is Kafka's numbered error code, the value a
  broker puts *inside* a response (``ErrorCode.unsupported_version == 35``). Handlers
  answer with these by name.
* ``ProtocolError`` and its subclasses are Python exceptions raised by the decoding
  layer when a peer's bytes cannot be understood. They are the peer's fault: the
  connection that sent them is answered (when a correlation id could be read) or
  closed, and the broker carries on.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = (
    "ConnectionClosed",
    "ErrorCode",
    "FrameTooLarge",
    "InvalidFrame",
    "MalformedRequest",
    "MalformedResponse",
    "ProtocolError",
    "UnexpectedResponse",
    "UnsupportedApiKey",
    "UnsupportedVersion",
)


class ProtocolError(Exception):
    """Bytes from a peer that do not follow the Kafka protocol."""

    complete_frames: tuple[bytes, ...] = ()
    """Set by ``FrameDecoder.feed`` on a framing error: the frames that were complete
    before the bad length prefix in the same call."""


class FrameTooLarge(ProtocolError):
    """A length prefix above ``socket.request.max.bytes``.

    Raised as soon as the 4-byte prefix is seen, so a hostile or confused peer cannot
    make us buffer 2 GiB before we notice.
    """

    def __init__(self, size: int, max_frame_bytes: int) -> None:
        super().__init__(f"frame of {size} bytes is larger than the limit of {max_frame_bytes}")
        self.size = size
        self.max_frame_bytes = max_frame_bytes


class InvalidFrame(ProtocolError):
    """A frame whose length prefix is negative."""


class MalformedRequest(ProtocolError):
    """A request header or body that does not decode (truncated, bad lengths, ...)."""


class MalformedResponse(ProtocolError):
    """A response (read by our own clients: followers, replay) that does not decode."""


class UnexpectedResponse(ProtocolError):
    """A response our client cannot pair with a request: nothing is in flight, or its
    correlation id is not that of the oldest request in flight (Kafka answers each
    connection's requests in order, so anything else means the stream is lost)."""


class ConnectionClosed(ProtocolError):
    """A ``ClientConnection`` used after the connection was lost or the peer broke the
    protocol: whatever it would send or read could not be paired any more."""


class UnsupportedApiKey(ProtocolError):
    """An api key for which there is no schema at all."""

    def __init__(self, api_key: int) -> None:
        super().__init__(f"unknown api key {api_key}")
        self.api_key = api_key


class UnsupportedVersion(ProtocolError):
    """A known api key at a version there is no schema for."""

    def __init__(self, api_key: int, api_version: int) -> None:
        super().__init__(f"unsupported version {api_version} of api key {api_key}")
        self.api_key = api_key
        self.api_version = api_version
