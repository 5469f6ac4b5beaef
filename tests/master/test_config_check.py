"""check-config's checks of what fails only at start: the data directory, TLS files (loaded as
the server loads them) and the master's checkpoint storage."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from pedl.config.master_config import MasterConfig, SharedFSStorage
from pedl.master.config_check import (
    config_summary,
    data_dir_problems,
    start_problems,
    storage_problems,
    tls_problems,
    writable_dir_problem,
)

AS_ROOT = os.geteuid() == 0  # root may write anywhere: permission checks cannot fail for it


def self_signed(tmp_path: Path, name: str) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "master.test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / f"{name}.crt", tmp_path / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


def test_tls_files_that_load_together_pass(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path, "a")
    assert tls_problems(cert, key) == []


def test_tls_problems_name_the_field(tmp_path: Path) -> None:
    cert_a, _ = self_signed(tmp_path, "a")
    _, key_b = self_signed(tmp_path, "b")
    [(field, why)] = tls_problems(cert_a, key_b)  # a key that is not the certificate's
    assert field == "security.tls" and "do not load" in why
    [(field, why)] = tls_problems(tmp_path / "absent.crt", key_b)
    assert field == "security.tls.cert" and "does not exist" in why
    [(field, why)] = tls_problems(cert_a, tmp_path)
    assert field == "security.tls.key" and "is not a file" in why


@pytest.mark.skipif(AS_ROOT, reason="root can read any file")
def test_an_unreadable_key_is_a_problem(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path, "a")
    key.chmod(0)
    [(field, why)] = tls_problems(cert, key)
    assert field == "security.tls.key" and why.startswith(f"{key} is not readable by ")


def test_data_dir_may_be_created_but_not_under_a_file(tmp_path: Path) -> None:
    assert writable_dir_problem(tmp_path / "new" / "deeper") is None
    assert writable_dir_problem(tmp_path) is None
    (tmp_path / "f").write_text("")
    assert writable_dir_problem(tmp_path / "f") == f"{tmp_path / 'f'} is not a directory"
    assert data_dir_problems(MasterConfig(data_dir=tmp_path / "f" / "d")) == [
        ("data_dir", f"cannot create {tmp_path / 'f' / 'd'}: {tmp_path / 'f'} is not a directory")
    ]


@pytest.mark.skipif(AS_ROOT, reason="root can write any directory")
def test_a_read_only_data_dir_is_a_problem(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    [(field, why)] = data_dir_problems(MasterConfig(data_dir=ro / "data"))
    assert field == "data_dir" and "is not writable" in why


def test_the_master_storage_must_be_an_absolute_directory(tmp_path: Path) -> None:
    assert storage_problems(MasterConfig(data_dir=tmp_path)) == []  # the default, data_dir/checkpoints
    relative = MasterConfig(data_dir=tmp_path, checkpoint_storage=SharedFSStorage(host_path="ckpts"))
    assert storage_problems(relative) == [("checkpoint_storage.host_path", "'ckpts' must be an absolute path")]
    (tmp_path / "file").write_text("")
    on_file = MasterConfig(data_dir=tmp_path, checkpoint_storage=SharedFSStorage(host_path=str(tmp_path / "file")))
    assert storage_problems(on_file) == [("checkpoint_storage.host_path", f"{tmp_path / 'file'} is not a directory")]
    assert start_problems(on_file) == storage_problems(on_file)


def test_summary(tmp_path: Path) -> None:
    config = MasterConfig(data_dir=tmp_path, port=9000, security={"checkpoint_storage_roots": ["s3://extra"]})
    rows = dict(config_summary(config))
    assert rows["Listens on"] == "http://0.0.0.0:9000"
    assert rows["Database"] == f"sqlite:///{tmp_path / 'pedl.db'}"
    assert rows["Checkpoint storage"] == f"shared_fs {tmp_path / 'checkpoints'} (also allowed: s3://extra)"
    assert rows["Resource pools"] == "default: static agents (no provider)"
