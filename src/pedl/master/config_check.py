"""`pedl master check-config`'s checks beyond the config's own validation: what otherwise fails only
when the master starts (data directory, TLS files, checkpoint storage), and the summary it prints.
Nothing here starts a master or opens the database."""

from __future__ import annotations

import os
import ssl
from pathlib import Path
from typing import Any

from pedl.config.checkpoint_storage import storage_root_of
from pedl.config.master_config import MasterConfig
from pedl.master.checkpoints.storage_roots import allowed_roots, storage_problem
from pedl.master.startup_summary import database_summary, pool_summary, task_users_summary

Problem = tuple[str, str]  # (field path, what is wrong)


def _who() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid {os.geteuid()}"


def writable_dir_problem(path: Path) -> str | None:
    """Why the master could not create or write the directory `path`; None when it could."""
    if path.exists():
        if not path.is_dir():
            return f"{path} is not a directory"
        if not os.access(path, os.W_OK | os.X_OK):
            return f"{path} is not writable by {_who()}"
        return None
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"cannot create {path}: {parent} is not a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot create {path}: {parent} is not writable by {_who()}"
    return None


def data_dir_problems(config: MasterConfig) -> list[Problem]:
    why = writable_dir_problem(config.data_dir)
    if why is not None:
        return [("data_dir", why)]
    sqlite_file = config.data_dir / "pedl.db"
    if config.db is None and sqlite_file.exists() and not os.access(sqlite_file, os.R_OK | os.W_OK):
        return [("data_dir", f"the SQLite database {sqlite_file} is not readable and writable by {_who()}")]
    return []


def readable_file_problem(path: str | os.PathLike[str]) -> str | None:
    p = Path(path)
    if not p.exists():
        return f"{p} does not exist"
    if not p.is_file():
        return f"{p} is not a file"
    if not os.access(p, os.R_OK):
        return f"{p} is not readable by {_who()}"
    return None


def tls_problems(
    cert: str | os.PathLike[str] | None, key: str | os.PathLike[str] | None, field: str = "security.tls"
) -> list[Problem]:
    """The certificate and key files exist, can be read, and load together as the server's."""
    problems = [
        (f"{field}.{name}", why)
        for name, path in (("cert", cert), ("key", key))
        if path is not None and (why := readable_file_problem(path)) is not None
    ]
    if problems or cert is None:
        return problems
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(str(cert), str(key) if key else None)
    except (ssl.SSLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc)
        problems.append((field, f"the certificate {cert} and key {key or '(in the same file)'} do not load: {reason}"))
    return problems


def configured_tls(config: MasterConfig) -> Any:
    """The `security.tls` section when it is set (a certificate given), else None."""
    tls = getattr(config.security, "tls", None)
    return tls if tls is not None and getattr(tls, "cert", None) is not None else None


def storage_problems(config: MasterConfig) -> list[Problem]:
    """The master's own checkpoint storage must be a root the master allows: a shared_fs directory
    given as an absolute path (a service starts in /, where a relative path means something else)."""
    storage = config.effective_checkpoint_storage().model_dump(mode="json")
    if storage["type"] == "shared_fs":
        host_path = os.path.expanduser(storage["host_path"])
        if not os.path.isabs(host_path):
            return [("checkpoint_storage.host_path", f"{storage['host_path']!r} must be an absolute path")]
        root = Path(storage_root_of(storage).path)
        if root.exists() and not root.is_dir():
            return [("checkpoint_storage.host_path", f"{root} is not a directory")]
    try:
        roots = allowed_roots(config)
    except ValueError as exc:
        return [("security.checkpoint_storage_roots", str(exc))]
    problem = storage_problem(storage, roots)
    return [problem] if problem is not None else []


def start_problems(config: MasterConfig) -> list[Problem]:
    """Everything that would stop this config's master at start, as far as can be told without starting it."""
    problems = data_dir_problems(config) + storage_problems(config)
    tls = configured_tls(config)
    if tls is not None:
        problems += tls_problems(getattr(tls, "cert", None), getattr(tls, "key", None))
    return problems


def storage_summary(config: MasterConfig) -> str:
    storage = config.effective_checkpoint_storage().model_dump(mode="json")
    text = f"{storage['type']} {storage_root_of(storage)}"
    if storage.get("endpoint_url"):
        text += f" at {storage['endpoint_url']}"
    if config.security.checkpoint_storage_roots:
        text += f" (also allowed: {', '.join(config.security.checkpoint_storage_roots)})"
    return text


def config_summary(config: MasterConfig) -> list[tuple[str, str]]:
    """Labelled rows: what a master started on this config would use."""
    scheme = "https" if configured_tls(config) is not None else "http"
    return [
        ("Listens on", f"{scheme}://{config.host}:{config.port}"),
        ("Database", database_summary(config)),
        ("Data directory", str(config.data_dir)),
        ("Resource pools", "\n".join(pool_summary(pool) for pool in config.resource_pools)),
        ("Task users", f"users with no agent user group: {task_users_summary(config)[0]}"),
        ("Checkpoint storage", storage_summary(config)),
    ]
