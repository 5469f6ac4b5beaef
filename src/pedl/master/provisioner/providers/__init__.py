"""Providers: where instances come from. `make_provider` builds the one a pool's config names."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pedl.config.master_config import ResourcePoolConfig
from pedl.master.provisioner.providers.base import Provider

if TYPE_CHECKING:
    from pedl.master.context import MasterContext


def make_provider(pool: ResourcePoolConfig, ctx: MasterContext) -> Provider:
    cfg = pool.provider
    if cfg is None:
        raise ValueError(f"pool {pool.pool_name} has no provider")
    tls = ctx.config.security.tls
    scheme = "https" if tls.enabled else "http"
    if cfg.type == "local":
        from pedl.master.provisioner.providers.local import LocalProvider

        master_url = cfg.master_url or f"{scheme}://127.0.0.1:{ctx.config.port}"
        # the certificate chain the master serves holds the CA that agents verify it against
        return LocalProvider(cfg, pool=pool.pool_name, cluster_id=ctx.cluster_id, data_dir=ctx.config.data_dir,
                             master_url=master_url, agent_token=ctx.agent_token, clock=ctx.clock,
                             master_cert=tls.cert if tls.enabled else None)
    if cfg.type == "aws":
        from pedl.master.provisioner.master_address import resolve_master_url
        from pedl.master.provisioner.providers.aws import AWSProvider

        master_url = resolve_master_url(cfg.master_url or f"{scheme}://ec2.local-ipv4:{ctx.config.port}")
        return AWSProvider(cfg, pool=pool.pool_name, cluster_id=ctx.cluster_id, master_url=master_url,
                           agent_token=ctx.agent_token, clock=ctx.clock,
                           master_ca=tls.cert.read_text() if tls.enabled and tls.cert else None)
    raise ValueError(f"unknown provider type {cfg.type!r}")
