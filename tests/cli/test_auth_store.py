"""The token cache file and Determined's password hashing."""

from __future__ import annotations

import hashlib
import json
import stat
from pathlib import Path

from pedl.cli.auth_store import AuthStore, config_dir, salt_and_hash

M1, M2 = "http://a:8080", "http://b:8080"


def test_salt_and_hash_matches_determined() -> None:
    expected = hashlib.sha512(b"GubPEmmotfiK9TMD6Zdw" + b"Secret123").hexdigest()
    assert salt_and_hash("Secret123") == expected
    assert len(expected) == 128
    assert salt_and_hash("") == ""  # a blank password is sent as "", not hashed


def test_config_dir_follows_env(isolated_config: Path) -> None:
    assert config_dir() == isolated_config
    assert AuthStore().path == isolated_config / "auth.json"


def test_tokens_are_keyed_by_master_and_user(isolated_config: Path) -> None:
    store = AuthStore()
    assert store.token(M1, "alice") is None
    store.set_token(M1, "alice", "t1")
    store.set_token(M1, "bob", "t2")
    store.set_token(M2, "alice", "t3")
    assert (store.token(M1, "alice"), store.token(M1, "bob"), store.token(M2, "alice")) == ("t1", "t2", "t3")
    store.drop_token(M1, "alice")
    assert store.token(M1, "alice") is None and store.token(M2, "alice") == "t3"


def test_active_user_per_master(isolated_config: Path) -> None:
    store = AuthStore()
    assert store.active_user(M1) is None
    store.set_active_user(M1, "alice")
    assert store.active_user(M1) == "alice" and store.active_user(M2) is None
    store.set_active_user(M1, None)
    assert store.active_user(M1) is None


def test_file_is_private_and_det_shaped(isolated_config: Path) -> None:
    store = AuthStore()
    store.set_token(M1, "alice", "t1")
    store.set_active_user(M1, "alice")
    mode = stat.S_IMODE(store.path.stat().st_mode)
    assert mode == 0o600
    data = json.loads(store.path.read_text())
    assert data == {"version": 2, "masters": {M1: {"active_user": "alice", "tokens": {"alice": "t1"}}}}


def test_a_corrupt_file_reads_as_empty_and_is_replaced(isolated_config: Path) -> None:
    isolated_config.mkdir(parents=True)
    (isolated_config / "auth.json").write_text("{not json")
    store = AuthStore()
    assert store.token(M1, "alice") is None
    store.set_token(M1, "alice", "t1")
    assert store.token(M1, "alice") == "t1"
