"""GET /api/v1/pedl/package: the wheel of the master's own pedl, for agents' user data to install
(with the cluster's agent token, or an instance's single-use enrollment secret until it is used) and
for users who want the same version as their master (with a login)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from pedl.common.package import own_wheel
from pedl.master.agents import credentials as agent_credentials
from pedl.master.api.deps import caller, ctx_of
from pedl.master.api.openapi import agent_token_too, produces

router = APIRouter(prefix="/api/v1")

AGENT_TOKEN_HEADER = "x-pedl-agent-token"


@router.get("/pedl/package")
@produces("application/octet-stream")
@agent_token_too
def pedl_package(request: Request) -> Response:
    if not agent_credentials.may_download(ctx_of(request), request.headers.get(AGENT_TOKEN_HEADER, "")):
        caller(request)  # else a user or task token; 401 without one
    wheel = own_wheel()  # built once per process, in this worker thread
    return Response(
        wheel.data,
        media_type="application/octet-stream",
        headers={
            "Content-Disposition": f'attachment; filename="{wheel.filename}"',
            "X-Pedl-Package-Sha256": wheel.sha256,
            "X-Pedl-Version": wheel.filename.split("-")[1],
        },
    )
