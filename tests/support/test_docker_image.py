"""The task test image and the Docker fixtures (tests/support/docker.py, docker_base.py)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.support import docker, docker_base


def test_the_image_runs_determined_and_pedl_core_offline(test_image: str) -> None:
    script = "import sys, determined, pedl.core; print(determined.__version__); print('%d.%d' % sys.version_info[:2])"
    done = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", test_image, "python3", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0.38.1", "3.11"]


@pytest.mark.slow
def test_an_image_is_reused_and_a_source_change_rebuilds_only_its_layer(
    test_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "pedl"  # a copy: others may edit src/pedl while this runs
    shutil.copytree(docker.PEDL_SRC, src, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(docker, "PEDL_SRC", src)
    first: list[str] = []
    name = docker.ensure_test_image(first.append)
    assert not [step for step in first if "debootstrap" in step or "adding determined" in step]
    again: list[str] = []
    assert docker.ensure_test_image(again.append) == name
    assert again == []
    # a change no earlier run made: an image left by a failed run must not stand in for the rebuild
    mark = uuid.uuid4().hex
    init = src / "core" / "__init__.py"
    init.write_text(init.read_text() + f"\nCHANGED = {mark!r}\n")
    changed: list[str] = []
    rebuilt = docker.ensure_test_image(changed.append)
    try:
        assert rebuilt != name and rebuilt.startswith("pedl-test-task:")
        assert [step.split(" as ")[0] for step in changed if step.startswith("adding")] == ["adding src/pedl"]
        done = subprocess.run(
            [
                "docker",
                "run",
                "--rm",
                "--network",
                "none",
                rebuilt,
                "python3",
                "-c",
                "import pedl.core; print(pedl.core.CHANGED)",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.stdout.strip() == mark, done.stderr
    finally:
        if rebuilt != name:
            subprocess.run(["docker", "rmi", rebuilt], capture_output=True)


def test_old_images_of_other_keys_are_removed(test_image: str, monkeypatch: pytest.MonkeyPatch) -> None:
    listed = subprocess.run(
        ["docker", "image", "ls", "--filter", "reference=pedl-test-*", "--format", "{{.Repository}}:{{.Tag}}"],
        capture_output=True,
        text=True,
        check=True,
    )
    others = set(listed.stdout.split())  # other sessions' images stay: only the one made here is old enough
    old = f"pedl-test-pruned:{uuid.uuid4().hex[:12]}"
    subprocess.run(["docker", "tag", test_image, old], check=True)
    monkeypatch.setattr(docker, "PRUNE_AFTER_S", -1)
    removed: list[str] = []
    docker._prune(others, removed.append)
    assert removed == [f"removed the old {old}"]
    assert not docker.image_exists(old)
    assert docker.image_exists(test_image)


def test_the_unknown_image_is_not_there(docker_daemon: str) -> None:
    name = docker.unknown_image_name()
    assert name != docker.unknown_image_name()
    assert not docker.image_exists(name)
    done = subprocess.run(
        ["docker", "run", "--rm", "--pull", "never", name, "true"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert "No such image" in done.stderr


def test_the_site_packages_hold_determined_and_pedl_core_requirements_without_pip() -> None:
    if not docker.DET_SITE.is_dir():
        pytest.skip(f"{docker.DET_SITE} is missing: make det-venv")
    files, dists = docker.site_packages()
    assert "determined==0.38.1" in dists
    assert {"httpx", "httpcore", "h11", "anyio", "idna", "certifi"} <= {d.split("==")[0] for d in dists}
    assert "determined/core/__init__.py" in files and "httpx/__init__.py" in files
    tops = {name.split("/")[0] for name in files}
    assert not tops & {"pip", "setuptools", "_distutils_hack", "distutils-precedence.pth"}
    assert not any(name.startswith("..") for name in files)


def test_a_changed_input_changes_the_key() -> None:
    before = docker.src_hash({"pedl/m.py": b"a = 1\n"})
    after = docker.src_hash({"pedl/m.py": b"a = 2\n"})
    assert docker.src_hash({"pedl/n.py": b"a = 1\n"}) != before
    assert before != after
    assert docker.layer_key("base", before) != docker.layer_key("base", after)
    assert docker.layer_key("base", "determined==0.38.1") != docker.layer_key("base", "determined==0.38.0")
    assert docker.layer_key("base", before) == docker.layer_key("base", before)
    assert docker.base_key() == docker.base_key()


def test_the_base_builder_needs_only_the_standard_library() -> None:
    """`make test` runs it with the system's python3 while the venvs are still installing."""
    tree = ast.parse(Path(docker_base.__file__).read_text())
    imported = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    imported |= {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
    }
    assert imported - {"__future__"} <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)


def test_the_mirror_is_apts_bookworm_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PEDL_TEST_DEBIAN_MIRROR", raising=False)
    (tmp_path / "sources.list.d").mkdir()
    assert docker_base.debian_mirror(tmp_path) == docker_base.DEFAULT_MIRROR
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\n# a comment\nURIs: http://security.example/debian-security\nSuites: bookworm-security\n"
        "Components: main\n\nTypes: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\n\n"
        "Types: deb\nURIs: http://mirror.example/debian/\nSuites: bookworm bookworm-updates\nComponents: main\n"
    )
    (tmp_path / "sources.list.d" / "other.list.disabled").write_text("deb http://off.example/debian bookworm main\n")
    assert docker_base.debian_mirror(tmp_path) == "http://mirror.example/debian"
    (tmp_path / "sources.list").write_text(
        "# deb http://old.example/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/k.gpg] http://list.example/debian bookworm main\n"
    )
    assert docker_base.debian_mirror(tmp_path) == "http://list.example/debian"
    monkeypatch.setenv("PEDL_TEST_DEBIAN_MIRROR", "http://override.example/debian")
    assert docker_base.debian_mirror(tmp_path) == "http://override.example/debian"


def test_a_newer_debian_hosts_mirror_serves_bookworm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PEDL_TEST_DEBIAN_MIRROR", raising=False)
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text(
        "deb http://security.example/debian-security trixie-security main\n"
        "deb http://mirror.example/debian trixie main\n"
    )
    assert docker_base.debian_mirror(tmp_path) == "http://mirror.example/debian"


def test_without_docker_the_tests_skip_and_under_ci_they_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no daemon"):
        docker._unavailable("no daemon")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="no daemon"):
        docker._unavailable("no daemon")


def test_docker_error_says_why_when_the_daemon_does_not_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    assert "docker" in (docker.docker_error() or "")
