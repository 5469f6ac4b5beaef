"""S3 failures as pedl errors: the one place where S3's error codes and boto3's exceptions become
NotFound, Forbidden, Unavailable or PedlError, with a message naming the bucket or key."""

from __future__ import annotations

from pedl.errors import Forbidden, NotFound, PedlError, Unavailable


def s3_error(
    exc: BaseException, action: str, where: str, bucket: str, endpoint_url: str | None = None
) -> PedlError | None:
    """A boto3/botocore failure as a pedl error whose message names the bucket or key; None for an
    exception that did not come from boto3."""
    from boto3.exceptions import S3TransferFailedError, S3UploadFailedError
    from botocore import exceptions as bx

    if isinstance(exc, S3UploadFailedError | S3TransferFailedError):
        cause = exc.__cause__ or exc.__context__  # boto3 raises it while handling the ClientError that says why
        if isinstance(cause, bx.ClientError | bx.BotoCoreError):
            exc = cause
    endpoint = endpoint_url or "AWS S3"
    if isinstance(exc, bx.NoCredentialsError | bx.PartialCredentialsError | bx.CredentialRetrievalError):
        return Forbidden(
            f"cannot {action} {where}: no usable AWS credentials ({exc}); set AWS_ACCESS_KEY_ID "
            "and AWS_SECRET_ACCESS_KEY, AWS_PROFILE or an instance profile"
        )
    if isinstance(
        exc, bx.EndpointConnectionError | bx.ConnectTimeoutError | bx.ReadTimeoutError | bx.ConnectionClosedError
    ):
        return Unavailable(f"cannot {action} {where}: {endpoint} is unreachable ({exc})")
    if isinstance(exc, bx.ClientError):
        error = exc.response.get("Error") or {}
        status = int((exc.response.get("ResponseMetadata") or {}).get("HTTPStatusCode") or 0)
        return s3_code_error(
            str(error.get("Code") or ""), str(error.get("Message") or ""), status, action, where, bucket
        )
    if isinstance(exc, bx.BotoCoreError | S3UploadFailedError | S3TransferFailedError):
        return PedlError(f"cannot {action} {where}: {exc}")
    return None


_FORBIDDEN = {
    "AccessDenied",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "InvalidToken",
    "AllAccessDisabled",
    "AccountProblem",
    "InvalidObjectState",
}
_UNAVAILABLE = {
    "SlowDown",
    "Throttling",
    "ThrottlingException",
    "RequestTimeout",
    "ServiceUnavailable",
    "InternalError",
    "RequestTimeTooSkewed",
}


def s3_code_error(
    code: str, message: str, status: int, action: str, where: str, bucket: str, more: int = 0
) -> PedlError:
    """An S3 error code (or, lacking one, the HTTP status) as the pedl error that says what went wrong
    with `action` on `where`; `more` counts further keys that failed the same way."""
    detail = f"{code}: {message}" if message and message != code else code or f"HTTP {status}"
    tail = f" (and {more} more key(s))" if more else ""
    if code == "NoSuchBucket":
        return NotFound(f"cannot {action} {where}: the bucket {bucket!r} does not exist{tail}")
    if code in ("NoSuchKey", "NotFound", "404") or status == 404:
        return NotFound(f"cannot {action} {where}: not found ({detail}){tail}")
    if code in _FORBIDDEN or status == 403:
        return Forbidden(f"cannot {action} {where}: access denied ({detail}){tail}")
    if code in _UNAVAILABLE or status >= 500:
        return Unavailable(f"cannot {action} {where}: S3 is unavailable ({detail}){tail}")
    return PedlError(f"cannot {action} {where}: {detail}{tail}")
