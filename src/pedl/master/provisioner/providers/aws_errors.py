"""AWS errors as CloudErrors: the one place where EC2's error codes and botocore's exceptions get
the kind the provisioner acts on."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import (
    ClientError,
    CredentialRetrievalError,
    HTTPClientError,
    NoCredentialsError,
    NoRegionError,
    ParamValidationError,
    PartialCredentialsError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError
from botocore.parsers import ResponseParserError

from pedl.master.provisioner.providers.base import CloudError, CloudErrorKind

CAPACITY_CODES = frozenset(
    {
        "InsufficientInstanceCapacity",
        "InsufficientCapacity",
        "InsufficientHostCapacity",
        "InsufficientReservedInstanceCapacity",
        "InsufficientCapacityOnHost",
        "SpotMaxPriceTooLow",
        "capacity-not-available",
        "capacity-oversubscribed",
        "price-too-low",
        # "type X is not supported in this Availability Zone": another type is the way out, as with capacity
        "Unsupported",
    }
)
QUOTA_CODES = frozenset(
    {
        "InstanceLimitExceeded",
        "VcpuLimitExceeded",
        "MaxSpotInstanceCountExceeded",
        "SpotInstanceLimitExceeded",
        "InsufficientFreeAddressesInSubnet",
        "AddressLimitExceeded",
        "VolumeLimitExceeded",
        "MaxIOPSLimitExceeded",
        "ResourceLimitExceeded",
        "PendingVerification",
    }
)
THROTTLED_CODES = frozenset(
    {
        "RequestLimitExceeded",
        "Throttling",
        "ThrottlingException",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "SlowDown",
        "PriorRequestNotComplete",
        "EC2ThrottledException",
    }
)
INVALID_CONFIG_CODES = frozenset(
    {
        "InvalidParameterValue",
        "InvalidParameterCombination",
        "InvalidParameter",
        "MissingParameter",
        "UnauthorizedOperation",
        "AuthFailure",
        "InvalidClientTokenId",
        "SignatureDoesNotMatch",
        "OptInRequired",
        "AccessDenied",
        "AccessDeniedException",
        "UnsupportedOperation",
        "NoSuchEntity",
        "InvalidInstanceType",
        "InvalidBlockDeviceMapping",
        "InvalidUserData.Malformed",
        "Blocked",
    }
)
INVALID_CONFIG_PREFIXES = (
    "InvalidAMIID.",
    "InvalidSubnetID.",
    "InvalidSubnet",
    "InvalidGroup.",
    "InvalidGroupId.",
    "InvalidSecurityGroupID.",
    "InvalidKeyPair.",
    "InvalidVpcID.",
    "InvalidNetworkInterface",
    "InvalidIamInstanceProfile",
    "InvalidParameter",
)
UNAVAILABLE_CODES = frozenset({"InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable"})
NOT_FOUND_CODES = frozenset({"InvalidInstanceID.NotFound", "InvalidSpotInstanceRequestID.NotFound"})


def classify_error(exc: Exception, operation: str = "") -> CloudError:
    """The one place where AWS errors become CloudErrors with a kind the provisioner acts on:
    CAPACITY (try another type or market), QUOTA and THROTTLED (back off), INVALID_CONFIG (a human
    must fix master.yaml or IAM), UNAVAILABLE (the endpoint), UNKNOWN."""
    where = f"{operation}: " if operation else ""
    details: dict[str, Any] = {"operation": operation} if operation else {}
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        code = str(err.get("Code") or "")
        message = str(err.get("Message") or exc)
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        details["http_status"] = status
        request_id = exc.response.get("ResponseMetadata", {}).get("RequestId")
        if request_id:
            details["request_id"] = request_id
        if code in CAPACITY_CODES:
            kind = CloudErrorKind.CAPACITY
        elif code in QUOTA_CODES:
            kind = CloudErrorKind.QUOTA
        elif code in THROTTLED_CODES:
            kind = CloudErrorKind.THROTTLED
        elif code in INVALID_CONFIG_CODES or code.startswith(INVALID_CONFIG_PREFIXES):
            kind = CloudErrorKind.INVALID_CONFIG
        elif code in UNAVAILABLE_CODES or status >= 500:
            kind = CloudErrorKind.UNAVAILABLE
        else:
            kind = CloudErrorKind.UNKNOWN
        return CloudError(kind, where + message, code, details)
    if isinstance(exc, BotoConnectionError | HTTPClientError | ResponseParserError):
        # connection refused or reset, DNS, timeouts, a proxy's HTML error page
        return CloudError(
            CloudErrorKind.UNAVAILABLE, f"{where}the EC2 endpoint did not answer: {exc}", type(exc).__name__, details
        )
    if isinstance(exc, NoCredentialsError | PartialCredentialsError | CredentialRetrievalError | NoRegionError):
        return CloudError(
            CloudErrorKind.INVALID_CONFIG,
            f"{where}{exc} (give the master an IAM role, or AWS credentials in its environment)",
            type(exc).__name__,
            details,
        )
    if isinstance(exc, ParamValidationError):
        return CloudError(CloudErrorKind.INVALID_CONFIG, f"{where}{exc}", type(exc).__name__, details)
    return CloudError(CloudErrorKind.UNKNOWN, f"{where}{exc}", type(exc).__name__, details)
