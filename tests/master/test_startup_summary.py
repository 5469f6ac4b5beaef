"""What a starting master logs about its database and pools."""

from __future__ import annotations

from pathlib import Path

from pedl.config.master_config import DatabaseConfig, MasterConfig, ResourcePoolConfig
from pedl.config.security_config import DefaultTaskUser
from pedl.master.startup_summary import database_summary, pool_summary, task_users_summary


def test_the_database_is_shown_without_its_password(tmp_path: Path) -> None:
    assert database_summary(MasterConfig(data_dir=tmp_path)) == f"sqlite:///{tmp_path / 'pedl.db'}"
    db = DatabaseConfig(host="db.lab", port=5433, user="pedl@lab", password="s3cr:et@x", name="pedl")
    shown = database_summary(MasterConfig(data_dir=tmp_path, db=db))
    assert shown == "postgresql://pedl%40lab@db.lab:5433/pedl?sslmode=prefer"
    assert "s3cr" not in shown


def test_each_pool_is_shown_with_its_provider() -> None:
    assert pool_summary(ResourcePoolConfig(pool_name="default")) == "default: static agents (no provider)"
    aws = ResourcePoolConfig.model_validate(
        {
            "pool_name": "gpu",
            "provider": {
                "type": "aws",
                "image_id": "ami-1",
                "ssh_key_name": "k",
                "instance_type": ["p3.8xlarge", "p3.2xlarge"],
                "min_instances": 1,
                "max_instances": 4,
                "spot": True,
            },
        }
    )
    assert pool_summary(aws) == "gpu: aws provider, p3.8xlarge, p3.2xlarge, 1 to 4 instances, spot"


def test_the_operator_hears_who_the_tasks_of_users_with_no_link_run_as() -> None:
    config = MasterConfig()
    assert task_users_summary(config) == (
        "each as a uid of their own, 1879048192 + their user id (security.task_uid_base)",
        True,
    )
    config.security.default_task = DefaultTaskUser(user="nobody", uid=65534, group="nogroup", gid=65534)
    assert task_users_summary(config)[0].endswith("; security.default_task is not used")
    config.security.task_uid_base = None  # Determined's behaviour: a warning, they are not kept apart
    assert task_users_summary(config) == (
        "all as nobody (uid 65534, security.default_task): their tasks can read each other's processes and files",
        False,
    )
    config.security.default_task = None
    assert task_users_summary(config)[0].startswith("as the agent's own user (root on a root agent)")
