"""One error hierarchy with stable codes, mapped to HTTP status in one place (master/api/errors.py)
and rebuilt by the CLI client."""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    INVALID_ARGUMENT = "invalid_argument"
    UNAUTHENTICATED = "unauthenticated"
    FORBIDDEN = "forbidden"
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    TOO_MANY_REQUESTS = "too_many_requests"
    UNAVAILABLE = "unavailable"
    BAD_GATEWAY = "bad_gateway"
    INTERNAL = "internal"


HTTP_STATUS = {
    ErrorCode.INVALID_ARGUMENT: 400,
    ErrorCode.UNAUTHENTICATED: 401,
    ErrorCode.FORBIDDEN: 403,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.CONFLICT: 409,
    ErrorCode.PAYLOAD_TOO_LARGE: 413,
    ErrorCode.TOO_MANY_REQUESTS: 429,
    ErrorCode.UNAVAILABLE: 503,
    ErrorCode.BAD_GATEWAY: 502,
    ErrorCode.INTERNAL: 500,
}


GRPC_CODE = {
    ErrorCode.INVALID_ARGUMENT: 3,
    ErrorCode.UNAUTHENTICATED: 16,
    ErrorCode.FORBIDDEN: 7,
    ErrorCode.NOT_FOUND: 5,
    ErrorCode.CONFLICT: 9,
    ErrorCode.PAYLOAD_TOO_LARGE: 3,  # INVALID_ARGUMENT, as grpc-gateway maps a too-large message
    ErrorCode.TOO_MANY_REQUESTS: 8,  # RESOURCE_EXHAUSTED
    ErrorCode.UNAVAILABLE: 14,
    ErrorCode.BAD_GATEWAY: 14,  # UNAVAILABLE: the service behind the master did not answer
    ErrorCode.INTERNAL: 13,
}

HTTP_REASON = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    409: "Conflict",
    413: "Payload Too Large",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


class PedlError(Exception):
    code: ErrorCode = ErrorCode.INTERNAL

    def __init__(self, message: str, *, fields: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields or []

    def to_dict(self) -> dict[str, Any]:
        # Determined's client reads `message` (401/403/404) or `error.error` (other statuses);
        # `code` is the gRPC code it expects, `pedlCode` our stable code for pedl's own client.
        grpc = GRPC_CODE[self.code]
        body: dict[str, Any] = {
            "code": grpc,
            "pedlCode": str(self.code),
            "message": self.message,
            "error": {
                "code": grpc,
                "reason": HTTP_REASON[HTTP_STATUS[self.code]],
                "error": self.message,
                "message": self.message,
            },
        }
        if self.fields:
            body["fields"] = self.fields
        return body


class InvalidArgument(PedlError):
    code = ErrorCode.INVALID_ARGUMENT

    @classmethod
    def at(cls, field: str, message: str) -> InvalidArgument:
        """'<field>: <message>', with the field named in `fields` for clients that point at it."""
        return cls(f"{field}: {message}", fields=[{"field": field, "message": message}])


class Unauthenticated(PedlError):
    code = ErrorCode.UNAUTHENTICATED


class Forbidden(PedlError):
    code = ErrorCode.FORBIDDEN


class NotFound(PedlError):
    code = ErrorCode.NOT_FOUND


class Conflict(PedlError):
    code = ErrorCode.CONFLICT


class PayloadTooLarge(PedlError):
    code = ErrorCode.PAYLOAD_TOO_LARGE


class TooManyRequests(PedlError):
    """`retry_after` (seconds) becomes the response's Retry-After header."""

    code = ErrorCode.TOO_MANY_REQUESTS

    def __init__(
        self, message: str, *, retry_after: int | None = None, fields: list[dict[str, Any]] | None = None
    ) -> None:
        super().__init__(message, fields=fields)
        self.retry_after = retry_after


class Unavailable(PedlError):
    code = ErrorCode.UNAVAILABLE


class BadGateway(PedlError):
    """A service the master relays to (a task's notebook) failed or did not answer."""

    code = ErrorCode.BAD_GATEWAY


_BY_CODE = {
    cls.code: cls
    for cls in (
        InvalidArgument,
        Unauthenticated,
        Forbidden,
        NotFound,
        Conflict,
        PayloadTooLarge,
        TooManyRequests,
        Unavailable,
        BadGateway,
    )
}


def error_from_response(status: int, body: Any) -> PedlError:
    """Rebuild a typed error on the client side from the master's JSON body."""
    message = f"HTTP {status}"
    fields: list[dict[str, Any]] = []
    code = None
    if isinstance(body, dict):
        message = body.get("message") or (body.get("error") or {}).get("message") or message
        fields = body.get("fields") or []
        code = body.get("pedlCode")
    cls = _BY_CODE.get(code) if code else None
    if cls is None:
        cls = {
            400: InvalidArgument,
            422: InvalidArgument,
            401: Unauthenticated,
            403: Forbidden,
            404: NotFound,
            409: Conflict,
            413: PayloadTooLarge,
            429: TooManyRequests,
            502: BadGateway,
            503: Unavailable,
        }.get(status, PedlError)
    return cls(message, fields=fields)
