"""Password handling compatible with the det CLI, which hashes client-side before sending:
sha512(salt + plaintext), or "" for an empty password. The master stores argon2 of that value.
Login session and task tokens are random; the master stores their sha256 (token_hash)."""

from __future__ import annotations

import hashlib

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

DET_CLIENT_SALT = "GubPEmmotfiK9TMD6Zdw"
_hasher = PasswordHasher()


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


def token_hash(token: str) -> str:
    """What the master stores of a session or task token: its sha256, hex."""
    return hashlib.sha256(token.encode()).hexdigest()
