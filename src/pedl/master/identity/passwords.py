"""Password handling compatible with the det CLI, which hashes client-side before sending:
sha512(salt + plaintext), or "" for an empty password. The master stores argon2 of that value.
Login session and task tokens are random; the master stores their sha256 (lifecycle/tokens.py)."""

from __future__ import annotations

import hashlib
import secrets

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

DET_CLIENT_SALT = "GubPEmmotfiK9TMD6Zdw"
_hasher = PasswordHasher()
_dummy: tuple[PasswordHasher, str] | None = None  # a hash of no one's password, and the hasher that made it


def configure(time_cost: int, memory_kib: int, parallelism: int) -> None:
    """The costs of the hashes this process makes from now on (master.yaml's security.password_hashing,
    set at master start); verifying reads each hash's own costs."""
    global _hasher
    _hasher = PasswordHasher(time_cost=time_cost, memory_cost=memory_kib, parallelism=parallelism)


def client_hash(plaintext: str) -> str:
    """What det (and pedl's CLI) sends with isHashed=true."""
    if plaintext == "":
        return ""
    return hashlib.sha512((DET_CLIENT_SALT + plaintext).encode()).hexdigest()


def normalize(password: str, is_hashed: bool) -> str:
    return password if is_hashed else client_hash(password)


def hash_password(normalized: str) -> str:
    return _hasher.hash(normalized)


def verify_password(stored_hash: str, normalized: str) -> bool:
    try:
        return _hasher.verify(stored_hash, normalized)
    except (VerificationError, InvalidHashError):
        return False


def dummy_hash() -> str:
    """A hash at the current costs that no password matches: a login of an unknown user name verifies
    against it, so that it costs what a known name's does and the answer's time does not tell which
    names exist."""
    global _dummy
    if _dummy is None or _dummy[0] is not _hasher:  # made at the current costs
        _dummy = (_hasher, _hasher.hash(secrets.token_hex(32)))
    return _dummy[1]
