"""DeployError, what every step of `pedl deploy aws` raises when it cannot go on (kept free of boto3,
so that the CLI imports it without loading the AWS SDK)."""

from __future__ import annotations


class DeployError(RuntimeError):
    """A step that cannot be done; the message says what and, where it can, how to fix it. `option` is
    the command-line option at fault (without dashes), if one is."""

    def __init__(self, message: str, option: str | None = None) -> None:
        self.option = option
        super().__init__(f"--{option}: {message}" if option else message)
