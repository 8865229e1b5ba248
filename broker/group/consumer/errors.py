"""An error the consumer group coordinator answers with (Kafka's ``ApiException``s).

The coordinator raises it where Kafka throws; the caller turns it into the response's
``error_code`` and ``error_message``. Raised before any change to a group, so a refused
request leaves the group as it was.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode


class ApiError(Exception):
    def __init__(self, error: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or error.name)
        self.error = error
        self.message = message
