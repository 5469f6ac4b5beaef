"""Login session and task tokens are random; the master stores their sha256 only. The scheduler's
assignment hashes a task's token as the login path hashes a user's, so the hash lives below both."""

from __future__ import annotations

import hashlib


def token_hash(token: str) -> str:
    """What the master stores of a session or task token: its sha256, hex."""
    return hashlib.sha256(token.encode()).hexdigest()
