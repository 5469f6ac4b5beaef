"""The wheel of the running pedl in the cluster's bucket, where the master's user data fetches it
(master_user_data.wheel_key): put once the bucket exists, and again only when its sha256 differs."""

from __future__ import annotations

from botocore.exceptions import ClientError

from pedl.common.package import Wheel
from pedl.deploy.aws_session import AwsSession, aws_errors, error_code
from pedl.deploy.master_user_data import WHEEL_PREFIX
from pedl.deploy.waiting import Progress

SHA256_METADATA = "sha256"  # x-amz-meta-sha256: what `up` compares before uploading again


def wheel_url(bucket: str, wheel: Wheel) -> str:
    return f"s3://{bucket}/{WHEEL_PREFIX}{wheel.filename}"


def uploaded_sha256(aws: AwsSession, bucket: str, wheel: Wheel) -> str | None:
    """The sha256 of the wheel of that name in the bucket, None when there is none."""
    try:
        head = aws.client("s3").head_object(Bucket=bucket, Key=WHEEL_PREFIX + wheel.filename)
    except ClientError as exc:
        if error_code(exc) in ("404", "NoSuchKey", "NotFound"):
            return None
        with aws_errors(f"HeadObject {wheel_url(bucket, wheel)}"):
            raise
    return (head.get("Metadata") or {}).get(SHA256_METADATA, "")


def upload_wheel(aws: AwsSession, bucket: str, wheel: Wheel, progress: Progress) -> str:
    """Put the wheel in the bucket unless the same one is there; its s3:// URL."""
    url = wheel_url(bucket, wheel)
    if uploaded_sha256(aws, bucket, wheel) == wheel.sha256:
        progress.step(f"{url} is already there (sha256 {wheel.sha256[:12]})")
        return url
    with aws_errors(f"uploading {url}"):
        aws.client("s3").put_object(
            Bucket=bucket,
            Key=WHEEL_PREFIX + wheel.filename,
            Body=wheel.data,
            ContentType="application/zip",
            Metadata={SHA256_METADATA: wheel.sha256},
        )
    progress.step(f"uploaded {wheel.filename} ({len(wheel.data) // 1024} KiB, sha256 {wheel.sha256[:12]}) to {url}")
    return url
