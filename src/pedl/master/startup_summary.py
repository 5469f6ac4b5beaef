"""What a starting master tells its operator: the database it uses (never its password), each resource
pool with the provider, if any, that launches its agents, and who the tasks of users with no agent user
group run as."""

from __future__ import annotations

from pedl.config.master_config import MasterConfig, ResourcePoolConfig


def database_summary(config: MasterConfig) -> str:
    """The database URL with no password in it, e.g. postgresql://pedl@db.lab:5432/pedl?sslmode=prefer."""
    if config.db is None:
        return config.database_url()  # a SQLite file path holds no secret
    from sqlalchemy.engine import URL

    return URL.create(
        "postgresql",
        username=config.db.user,
        host=config.db.host,
        port=config.db.port,
        database=config.db.name,
        query={"sslmode": config.db.ssl_mode},
    ).render_as_string()


def pool_summary(pool: ResourcePoolConfig) -> str:
    """`default: static agents (no provider)` or `gpu: aws provider, p3.8xlarge, 0 to 5 instances, spot`."""
    provider = pool.provider
    if provider is None:
        return f"{pool.pool_name}: static agents (no provider)"
    parts = [
        f"{provider.type} provider",
        ", ".join(provider.instance_types()),
        f"{provider.min_instances} to {provider.max_instances} instances",
    ]
    if getattr(provider, "spot", False):
        parts.append("spot")
    return f"{pool.pool_name}: {', '.join(parts)}"


def task_users_summary(config: MasterConfig) -> tuple[str, bool]:
    """Who the tasks of users with no agent user group run as on root agents, and whether those users'
    tasks are kept apart from each other (False: the operator should hear it as a warning)."""
    security = config.security
    if security.task_uid_base is not None:
        ignored = "; security.default_task is not used" if security.default_task is not None else ""
        return (
            f"each as a uid of their own, {security.task_uid_base} + their user id (security.task_uid_base){ignored}",
            True,
        )
    task = security.default_task
    if task is not None:
        return (
            f"all as {task.user} (uid {task.uid}, security.default_task): their tasks can read each other's "
            "processes and files",
            False,
        )
    return (
        "as the agent's own user (root on a root agent): their tasks can read each other's processes and files",
        False,
    )
