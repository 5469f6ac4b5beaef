"""The `docker run` command line of a container task and its env file (pure parts)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from pedl.agent.containers import ContainerError, container_name, pick_image, run_argv, write_env_file
from pedl.common.agent_protocol import ContainerSpec


def _argv(**kw) -> list[str]:
    spec = kw.pop("spec", ContainerSpec(image_cpu="img:cpu", image_gpu="img:gpu"))
    args = dict(
        spec=spec,
        image="img:cpu",
        allocation_id="3.abc.1",
        agent_id="a1",
        task_dir=Path("/w/a1/3.abc.1"),
        info_dir=Path("/w/a1/.det-info/3.abc.1"),
        env_file=Path("/w/a1/.det-info/3.abc.1.env"),
        entrypoint=["python3", "train.py"],
        gpu_devices=[],
        shared_fs=None,
        master_cert=None,
    )
    args.update(kw)
    return run_argv(**args)


def test_the_task_runs_attached_removed_labelled_with_its_files() -> None:
    argv = _argv(shared_fs=Path("/data/ckpts"), master_cert=Path("/etc/pedl/ca.pem"))
    assert argv[:4] == ["docker", "run", "--rm", "--init"]
    assert argv[argv.index("--name") + 1] == container_name("3.abc.1", "a1") == "pedl-3.abc.1-a1"
    labels = [argv[i + 1] for i, a in enumerate(argv) if a == "--label"]
    assert labels == ["pedl.agent-id=a1", "pedl.allocation-id=3.abc.1", "pedl.work-dir=/w/a1"]
    mounts = [argv[i + 1] for i, a in enumerate(argv) if a == "-v"]
    assert mounts == [
        "/w/a1/3.abc.1:/run/determined/workdir",
        "/w/a1/.det-info/3.abc.1:/run/determined/info:ro",
        "/data/ckpts:/determined_shared_fs",
        "/data/ckpts:/data/ckpts",
        "/etc/pedl/ca.pem:/etc/pedl/ca.pem:ro",
    ]
    assert argv[argv.index("--env-file") + 1] == "/w/a1/.det-info/3.abc.1.env"  # not in argv: /proc shows argv
    assert argv[argv.index("--network") + 1] == "host" and argv[argv.index("--pull") + 1] == "never"
    assert argv[-3:] == ["img:cpu", "python3", "train.py"] and "--gpus" not in argv


def test_bind_mounts_gpus_shm_and_network_follow_the_spec() -> None:
    spec = ContainerSpec(
        image_cpu="c",
        image_gpu="g",
        shm_size_bytes=1024,
        network_mode="bridge",
        bind_mounts=[
            {"host_path": "/data", "container_path": "/in", "read_only": True, "propagation": "rslave"},
            {"host_path": "/out", "container_path": "/out", "read_only": False},
        ],
    )
    argv = _argv(spec=spec, image="g", gpu_devices=["GPU-aa", "GPU-bb"])
    mounts = [argv[i + 1] for i, a in enumerate(argv) if a == "-v"]
    assert "/data:/in:ro,rslave" in mounts and "/out:/out:rw,rprivate" in mounts
    assert argv[argv.index("--gpus") + 1] == '"device=GPU-aa,GPU-bb"'
    assert argv[argv.index("--shm-size") + 1] == "1024" and argv[argv.index("--network") + 1] == "bridge"


def test_the_image_is_picked_by_the_slots_and_a_missing_one_is_named() -> None:
    spec = ContainerSpec(image_cpu="c:1", image_gpu=None)
    assert pick_image(spec, gpu=False) == "c:1"
    with pytest.raises(ContainerError, match="names no gpu image"):
        pick_image(spec, gpu=True)


def test_the_env_file_is_private_and_refuses_what_it_cannot_carry(tmp_path: Path) -> None:
    path = tmp_path / "t.env"
    write_env_file(path, {"DET_SESSION_TOKEN": "secret", "A": "x=y"})
    assert path.read_text() == "DET_SESSION_TOKEN=secret\nA=x=y\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    with pytest.raises(ContainerError, match="'MULTI'"):
        write_env_file(path, {"MULTI": "a\nb"})


def test_each_agent_names_its_container_of_an_allocation_apart() -> None:
    # two agents of one host share its Docker daemon: a trial spread over both runs a container on each
    assert container_name("3.abc.1", "host-a") != container_name("3.abc.1", "host-b")
    assert container_name("3.abc.1", "gpu node/7") == "pedl-3.abc.1-gpu-node-7"  # only what docker allows
