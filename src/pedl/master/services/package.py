"""The installable package of the master's own version, so an agent on a stock image (an AWS Deep
Learning AMI) installs exactly the master's version from the master (`GET /api/v1/pedl/package`) and
needs no custom AMI and no index access for pedl itself (its dependencies still come from the agent's
index). The builder lives in pedl.common.package, which `pedl deploy aws up` shares."""

from __future__ import annotations

from pedl.common.package import NAME, TAG, Wheel, build_wheel, own_wheel, wheel_filename

__all__ = ["NAME", "TAG", "Wheel", "build_wheel", "master_wheel", "wheel_filename"]


def master_wheel() -> Wheel:
    """The running master's own wheel, built on first use."""
    return own_wheel()
