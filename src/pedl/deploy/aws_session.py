"""The AWS side of `pedl deploy aws`: boto3 clients of one region, all pointed at one endpoint when
--endpoint-url is given (moto, LocalStack), and AWS errors turned into DeployError."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from pedl.deploy.deploy_error import DeployError

__all__ = ["AwsSession", "DeployError", "aws_errors", "error_code", "error_message", "open_session"]

# a deploy waits on CloudFormation itself; botocore's own retries only smooth over throttling
_CONFIG = Config(retries={"mode": "standard", "max_attempts": 8}, connect_timeout=10, read_timeout=60)


def error_code(exc: BaseException) -> str:
    """AWS's error code of a ClientError ("ValidationError", "InvalidKeyPair.NotFound"), else ""."""
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""


def error_message(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"{error.get('Code', 'error')}: {error.get('Message', '')}".rstrip(": ")
    return str(exc)


@contextlib.contextmanager
def aws_errors(doing: str) -> Iterator[None]:
    """Turn a failed AWS call into a DeployError saying what was being done."""
    try:
        yield
    except NoCredentialsError:
        raise DeployError(
            "no AWS credentials: configure some (aws configure, AWS_PROFILE, or "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
        ) from None
    except (ClientError, BotoCoreError) as exc:
        raise DeployError(f"{doing} failed: {error_message(exc)}") from None


@dataclass
class AwsSession:
    """Clients of one region; with `endpoint_url`, every service is asked there."""

    region: str
    endpoint_url: str | None = None
    session: Any = None  # boto3.Session
    _clients: dict[str, Any] = field(default_factory=dict, repr=False)

    def client(self, service: str) -> Any:
        if service not in self._clients:
            session = self.session or boto3.Session()
            self._clients[service] = session.client(
                service, region_name=self.region, endpoint_url=self.endpoint_url, config=_CONFIG
            )
        return self._clients[service]


def open_session(region: str | None, endpoint_url: str | None = None) -> AwsSession:
    """A session in `region`, else the AWS configuration's region; a DeployError without either."""
    session = boto3.Session(region_name=region) if region else boto3.Session()
    region = region or session.region_name
    if not region:
        raise DeployError("no AWS region: give --region, or configure one (aws configure, AWS_REGION)", option="region")
    if endpoint_url is not None and not endpoint_url.startswith(("http://", "https://")):
        raise DeployError(f"{endpoint_url!r} is not an http:// or https:// URL", option="endpoint-url")
    return AwsSession(region=region, endpoint_url=endpoint_url, session=session)
