"""minikafka's wire layer: bytes <-> typed Kafka messages, sans-IO.

Message bodies are kio's generated classes; framing, headers, the version registry and
the version-agnostic builders are ours, with the generated fast writers and body guards,
record batches (v2, control batches, compression), the one sans-IO client connection
(``client``), the capture record shared by the broker and the Spark jobs (``capture``,
``capture_files``) and the service-time model of a simulated broker (``service_times``).
It imports none of our packages and never asyncio or socket (import-linter contracts).
"""

from protocol.api_registry import (
    KIO_VERSIONS,
    ApiSpec,
    api_name,
    is_flexible,
    request_class,
    request_header_version,
    response_class,
    response_header_version,
)
from protocol.builders import Builder, request_builder, response_builder
from protocol.client import ClientConnection, InFlightRequest, Outgoing, Response
from protocol.codec import (
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    parse_request_header,
    unsupported_version_api_versions_response,
)
from protocol.errors import (
    ConnectionClosed,
    ErrorCode,
    FrameTooLarge,
    InvalidFrame,
    MalformedRequest,
    MalformedResponse,
    ProtocolError,
    UnexpectedResponse,
    UnsupportedApiKey,
    UnsupportedVersion,
)
from protocol.frames import DEFAULT_MAX_FRAME_BYTES, FrameDecoder, encode_frame

__all__ = (
    "DEFAULT_MAX_FRAME_BYTES",
    "KIO_VERSIONS",
    "ApiSpec",
    "Builder",
    "ClientConnection",
    "ConnectionClosed",
    "ErrorCode",
    "FrameDecoder",
    "FrameTooLarge",
    "InFlightRequest",
    "InvalidFrame",
    "MalformedRequest",
    "MalformedResponse",
    "Outgoing",
    "ProtocolError",
    "RequestHeader",
    "Response",
    "UnexpectedResponse",
    "UnsupportedApiKey",
    "UnsupportedVersion",
    "api_name",
    "decode_request",
    "decode_response",
    "encode_frame",
    "encode_request",
    "encode_response",
    "is_flexible",
    "parse_request_header",
    "request_builder",
    "request_class",
    "request_header_version",
    "response_builder",
    "response_class",
    "response_header_version",
    "unsupported_version_api_versions_response",
)
