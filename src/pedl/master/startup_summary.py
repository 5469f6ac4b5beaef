"""What a starting master tells its operator: the database it uses (never its password) and each
resource pool with the provider, if any, that launches its agents."""

from __future__ import annotations

from pedl.config.master_config import MasterConfig, ResourcePoolConfig


def database_summary(config: MasterConfig) -> str:
    """The database URL with no password in it, e.g. postgresql://pedl@db.lab:5432/pedl?sslmode=prefer."""
    if config.db is None:
        return config.database_url()  # a SQLite file path holds no secret
    from sqlalchemy.engine import URL

    return URL.create("postgresql", username=config.db.user, host=config.db.host, port=config.db.port,
                      database=config.db.name, query={"sslmode": config.db.ssl_mode}).render_as_string()


def pool_summary(pool: ResourcePoolConfig) -> str:
    """`default: static agents (no provider)` or `gpu: aws provider, p3.8xlarge, 0 to 5 instances, spot`."""
    provider = pool.provider
    if provider is None:
        return f"{pool.pool_name}: static agents (no provider)"
    parts = [f"{provider.type} provider", ", ".join(provider.instance_types()),
             f"{provider.min_instances} to {provider.max_instances} instances"]
    if getattr(provider, "spot", False):
        parts.append("spot")
    return f"{pool.pool_name}: {', '.join(parts)}"
