"""Login tokens cached on disk, keyed by master URL and username, plus each master's active user.
Lives in `~/.pedl/auth.json` (`PEDL_CONFIG_DIR` overrides the directory); written 0600, atomically."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

# Determined's client-side salt: the master stores hashes of sha512(salt + plaintext).
PASSWORD_SALT = "GubPEmmotfiK9TMD6Zdw"
DEFAULT_USER = "determined"
CONFIG_DIR_ENV = "PEDL_CONFIG_DIR"


def salt_and_hash(password: str) -> str:
    """Hash a password the way Determined's client does; an empty password stays empty."""
    if not password:
        return ""
    return hashlib.sha512((PASSWORD_SALT + password).encode()).hexdigest()


def config_dir() -> Path:
    override = os.environ.get(CONFIG_DIR_ENV)
    return Path(override).expanduser() if override else Path.home() / ".pedl"


class AuthStore:
    """`{"version": 2, "masters": {url: {"active_user": name|null, "tokens": {name: token}}}}`."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or config_dir() / "auth.json"

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {"version": 2, "masters": {}}
        if not isinstance(data, dict) or not isinstance(data.get("masters"), dict):
            return {"version": 2, "masters": {}}
        return data

    def _save(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=".auth.", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, indent=2)
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def _master(self, data: dict[str, Any], master: str) -> dict[str, Any]:
        entry = data["masters"].setdefault(master, {})
        if not isinstance(entry.get("tokens"), dict):
            entry["tokens"] = {}
        entry.setdefault("active_user", None)
        return entry

    def token(self, master: str, username: str) -> str | None:
        entry = self._load()["masters"].get(master) or {}
        token = (entry.get("tokens") or {}).get(username)
        return token if isinstance(token, str) and token else None

    def active_user(self, master: str) -> str | None:
        entry = self._load()["masters"].get(master) or {}
        user = entry.get("active_user")
        return user if isinstance(user, str) and user else None

    def set_token(self, master: str, username: str, token: str) -> None:
        data = self._load()
        self._master(data, master)["tokens"][username] = token
        self._save(data)

    def drop_token(self, master: str, username: str) -> None:
        data = self._load()
        entry = self._master(data, master)
        if entry["tokens"].pop(username, None) is not None:
            self._save(data)

    def set_active_user(self, master: str, username: str | None) -> None:
        data = self._load()
        self._master(data, master)["active_user"] = username
        self._save(data)
