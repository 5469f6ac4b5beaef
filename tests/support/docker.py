"""Task containers under a real Docker daemon: the `docker_daemon` and `test_image` fixtures.

The test image is built offline and never pulled from a registry. debootstrap makes a Debian
bookworm root filesystem from the Debian mirror apt uses. Its python3 is 3.11, like the venvs', so
their cp311 wheels load. `docker import` turns it into an image (tests/support/docker_base.py), and
two layers are added on top:
- what .venv-det holds: the `determined` 0.38.1 package with all its dependencies, and torch (its CPU
  build) and torchvision, which Determined's PyTorchTrial and its images carry (torchvision as
  tools/torchvision_without_ops.py mended it), without torch's C++ headers, tests and build tools;
- the packages `pedl.core` imports (httpx and what it requires), from the running venv.
A third layer adds pedl's source (src/pedl).

The images (each is reused while `docker image inspect` finds it):
  pedl-test-base:<key>  the debootstrap rootfs, with its tarball cached in ~/.cache/pedl-test-images
  pedl-test-deps:<key>  the base, plus the site-packages in /usr/local/lib/python3.11/dist-packages
  pedl-test-task:<key>  the deps, plus src/pedl: the image `test_image` returns
Each key hashes the inputs of its layer and the key of the layer below (for the site-packages: the
distributions' versions, and the size and modification time of each file, so that a file changed in
place, as the torchvision mend does, rebuilds the layer). A changed input rebuilds from that layer
up, so an edit of pedl's source rebuilds only the last layer (seconds). The first build takes
minutes; under pytest its steps go to ~/.cache/pedl-test-images/build.log too.
`python -m tests.support.docker` builds the image, and `make docker` runs it (after
`python3 -m tests.support.docker_base`, which needs no venv, has built the base).
"""

from __future__ import annotations

import contextlib
import csv
import datetime
import importlib.metadata
import io
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support import docker_base
from tests.support.docker_base import (
    SITE_DIR,
    ImageBuildError,
    ImageUnavailable,
    Log,
    _build_lock,
    _digest,
    _docker,
    _ensure_base,
    base_key,
    cache_dir,
    image_exists,
)

REPO = Path(__file__).resolve().parents[2]
PEDL_SRC = REPO / "src" / "pedl"
DET_SITE = REPO / ".venv-det" / "lib" / "python3.11" / "site-packages"
DETERMINED_VERSION = "0.38.1"
# besides determined: what a PyTorchTrial needs, which `make det-venv` installs beside it
REQUIRED_DISTRIBUTIONS = ("torch", "torchvision")
# pedl.core's third-party imports; what they require (markers evaluated for 3.11) comes along
PEDL_CORE_REQUIREMENTS = ("httpx", "orjson")
SKIPPED_DISTRIBUTIONS = {"pip", "setuptools"}  # setuptools' RECORD holds _distutils_hack and its .pth
# what no task uses: googleapiclient's offline copies of Google's API discovery documents (100 MB), and
# torch's C++ headers and CMake files (for building extensions, which the image has no compiler for), its
# C++ test binaries and its bin/ of test programs and protoc (190 MB together)
SKIPPED_PREFIXES = (
    "googleapiclient/discovery_cache/documents/",
    "torch/include/",
    "torch/share/",
    "torch/test/",
    "torch/bin/",
)
# but torch.multiprocessing's file_system sharing strategy runs this one
KEPT_FILES = frozenset({"torch/bin/torch_shm_manager"})

PRUNE_AFTER_S = 24 * 3600  # the test images of other keys are removed once older than this


def unknown_image_name() -> str:
    """An image that exists nowhere. The `.invalid` domain (RFC 2606) never resolves, so even an
    attempted pull fails at once without reaching a registry."""
    return f"pedl-test.invalid/no-such-image:{uuid.uuid4().hex[:12]}"


def docker_error() -> str | None:
    """None when a Docker daemon answers, else why not."""
    if not shutil.which("docker"):
        return "the docker command is not installed"
    try:
        done = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True, timeout=30
        )
    except subprocess.TimeoutExpired:
        return "`docker info` did not answer in 30 s"
    if done.returncode != 0 or not done.stdout.strip():
        lines = (done.stderr or done.stdout).strip().splitlines()
        return f"`docker info` failed: {lines[-1] if lines else f'exit status {done.returncode}'}"
    return None


# -- keys ---------------------------------------------------------------------------------------------


def _pedl_sources() -> dict[str, bytes]:
    """src/pedl's files, by their path in the image's dist-packages (caches left out). Read once, so
    that the image holds what its key hashes even while someone edits the tree."""
    files = {}
    for path in sorted(PEDL_SRC.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            files[f"pedl/{path.relative_to(PEDL_SRC).as_posix()}"] = path.read_bytes()
    return files


def src_hash(files: dict[str, bytes] | None = None) -> str:
    files = _pedl_sources() if files is None else files
    return _digest(*(part for name, data in sorted(files.items()) for part in (name, data)))


def layer_key(below: str, *inputs: str) -> str:
    """A layer's key: the key below it, the builders' own text, and the layer's inputs."""
    return _digest(below, Path(__file__).read_bytes(), Path(docker_base.__file__).read_bytes(), *inputs)


# -- the site-packages --------------------------------------------------------------------------------


def _record_files(dist: importlib.metadata.Distribution) -> dict[str, str]:
    """A distribution's installed files by their path in site-packages, from its RECORD. Plain strings:
    pathlib would spend seconds on the 40,000 files of .venv-det, once in every pytest worker."""
    record = dist.read_text("RECORD")
    if record is None:
        raise ImageBuildError(f"{dist.metadata['Name']} has no RECORD: reinstall it with pip")
    root = str(dist.locate_file(""))
    files = {}
    for row in csv.reader(record.splitlines()):
        arcname = row[0] if row else ""
        # scripts in bin/ (../../../bin/...), and the skipped
        if not arcname or arcname.startswith(("../", "/")) or _skipped(arcname):
            continue
        path = os.path.join(root, arcname)
        if os.path.isfile(path) or os.path.islink(path):
            files[arcname] = path
    return files


def _skipped(arcname: str) -> bool:
    return arcname.startswith(SKIPPED_PREFIXES) and arcname not in KEPT_FILES


def files_stamp(files: dict[str, str]) -> str:
    """The size and modification time of each file but the compiled .pyc (Python rewrites a stale
    one when it imports its module; the source says what changed): reading 1.3 GB to hash its
    content would take longer than the layer's build."""
    parts = []
    for arcname, path in sorted(files.items()):
        if not arcname.endswith(".pyc"):
            stat = os.lstat(path)
            parts.append(f"{arcname}\0{stat.st_size}\0{stat.st_mtime_ns}")
    return _digest("\n".join(parts))


def _pedl_core_distributions() -> list[importlib.metadata.Distribution]:
    """PEDL_CORE_REQUIREMENTS and what they require, as installed in the running venv."""
    found: dict[str, importlib.metadata.Distribution] = {}
    todo = [Requirement(name) for name in PEDL_CORE_REQUIREMENTS]
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        if name in found:
            continue
        try:
            found[name] = dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            raise ImageBuildError(f"{name} (pedl.core needs it) is not installed in {sys.prefix}") from None
        for text in dist.requires or []:
            required = Requirement(text)
            if required.marker is None or required.marker.evaluate({"extra": ""}):
                todo.append(required)
    return [found[name] for name in sorted(found)]


def site_packages() -> tuple[dict[str, str], list[str]]:
    """The image's dist-packages (path there -> file here), and its distributions as name==version.

    Everything installed in .venv-det but pip and setuptools (and SKIPPED_PREFIXES), then pedl.core's
    requirements from the running venv; a distribution in both comes from the running venv."""
    installed = importlib.metadata.distributions(path=[str(DET_SITE)])
    det_dists = {canonicalize_name(d.metadata["Name"]): d for d in installed}
    determined = det_dists.get("determined")
    if determined is None or determined.version != DETERMINED_VERSION:
        found = determined.version if determined else "nothing"
        raise ImageBuildError(
            f"{DET_SITE} holds determined {found}, not {DETERMINED_VERSION}: rm -rf .venv-det && make det-venv"
        )
    missing = [name for name in REQUIRED_DISTRIBUTIONS if name not in det_dists]
    if missing:
        raise ImageBuildError(
            f"{DET_SITE} has no {' or '.join(missing)}, which the image carries for "
            "PyTorchTrials: rm -rf .venv-det && make det-venv"
        )
    chosen = {name: dist for name, dist in det_dists.items() if name not in SKIPPED_DISTRIBUTIONS}
    chosen.update({canonicalize_name(d.metadata["Name"]): d for d in _pedl_core_distributions()})
    files: dict[str, str] = {}
    for dist in chosen.values():
        files.update(_record_files(dist))
    return files, sorted(f"{name}=={dist.version}" for name, dist in chosen.items())


# -- docker --------------------------------------------------------------------------------------------


def _root_owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def _commit_layer(below: str, name: str, files: dict[str, str] | dict[str, bytes], dest: str) -> None:
    """Image `name`: image `below` with `files` (path under dest -> file here, or its content)
    added, by `docker create`, `docker cp` of a tar stream, and `docker commit`."""
    container = f"pedl-test-build-{uuid.uuid4().hex[:12]}"
    _docker("create", "--name", container, "--network", "none", below, "true")
    try:
        parents = sorted({parent.as_posix() for arcname in files for parent in Path(arcname).parents} - {"."})
        copy = subprocess.Popen(
            ["docker", "cp", "-", f"{container}:/{dest}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            with tarfile.open(fileobj=copy.stdin, mode="w|") as tar:
                for directory in parents:
                    info = _root_owned(tarfile.TarInfo(directory))
                    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, int(time.time())
                    tar.addfile(info)
                for arcname, source in sorted(files.items()):
                    if isinstance(source, bytes):
                        info = _root_owned(tarfile.TarInfo(arcname))
                        info.size, info.mode, info.mtime = len(source), 0o644, int(time.time())
                        tar.addfile(info, io.BytesIO(source))
                    else:
                        tar.add(source, arcname=arcname, recursive=False, filter=_root_owned)
            copy.stdin.close()
        except BrokenPipeError:
            pass  # docker cp stopped reading: its status and message say why
        err = copy.stderr.read()
        if copy.wait() != 0:
            raise ImageBuildError(f"docker cp into {below} failed: {err.decode(errors='replace').strip()}")
        _docker("commit", container, name)
    finally:
        subprocess.run(["docker", "rm", "-f", container], capture_output=True)


# -- the build ----------------------------------------------------------------------------------------


def _prune(keep: set[str], log: Log) -> None:
    """Untag the test images of other keys built over PRUNE_AFTER_S ago (a session that started
    before the source changed may still use a recent one); `docker rmi` leaves those in use."""
    listed = subprocess.run(
        [
            "docker",
            "image",
            "ls",
            "--filter",
            "reference=pedl-test-*",
            "--format",
            "{{.Repository}}:{{.Tag}}\t{{.CreatedAt}}",
        ],
        capture_output=True,
        text=True,
    )
    now = datetime.datetime.now(datetime.UTC)
    for line in listed.stdout.splitlines():
        name, _, created = line.partition("\t")
        with contextlib.suppress(ValueError):
            age = now - datetime.datetime.strptime(created[:25], "%Y-%m-%d %H:%M:%S %z")
            old = name not in keep and age.total_seconds() > PRUNE_AFTER_S
            if old and subprocess.run(["docker", "rmi", name], capture_output=True).returncode == 0:
                log(f"removed the old {name}")


def ensure_test_image(log: Log = print) -> str:
    """The name of the task test image, built first if no image of its key exists."""
    site_files, dists = site_packages()
    deps_key = layer_key(base_key(), *dists, files_stamp(site_files))
    src_files = _pedl_sources()
    name = f"pedl-test-task:{layer_key(deps_key, src_hash(src_files))}"
    if image_exists(name):
        return name
    with _build_lock():
        if image_exists(name):  # another worker built it while this one waited
            return name
        started = time.monotonic()
        base = _ensure_base(log)
        deps = f"pedl-test-deps:{deps_key}"
        if not image_exists(deps):
            log(f"adding determined {DETERMINED_VERSION}, torch and {len(dists)} distributions in all as {deps}")
            layer_started = time.monotonic()
            _commit_layer(base, deps, site_files, SITE_DIR)
            log(f"added {len(site_files)} files in {time.monotonic() - layer_started:.0f} s")
        log(f"adding src/pedl as {name}")
        _commit_layer(deps, name, src_files, SITE_DIR)
        log(f"built {name} in {time.monotonic() - started:.0f} s")
        _prune({base, deps, name}, log)
    return name


# -- the fixtures ------------------------------------------------------------------------------------------


def _unavailable(message: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{message}\nUnder CI the container tests must run: `make test` provides Docker.", pytrace=False)
    pytest.skip(message)


@contextlib.contextmanager
def _timeout_paused() -> Iterator[None]:
    """pytest-timeout arms SIGALRM around each test, its fixtures' setup included. A first build
    takes minutes and should not count against the test that happens to ask for the image first."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    remaining, interval = signal.getitimer(signal.ITIMER_REAL)
    signal.setitimer(signal.ITIMER_REAL, 0)
    try:
        yield
    finally:
        if remaining:
            signal.setitimer(signal.ITIMER_REAL, remaining, interval)


@pytest.fixture(scope="session")
def docker_daemon() -> str:
    """The docker command, once `docker info` answers. Without Docker the test skips, and under
    CI it fails."""
    error = docker_error()
    if error:
        _unavailable(
            f"Docker is not available ({error}): the container tests skip outside CI. "
            "`make docker` as root installs Debian's docker.io and starts dockerd."
        )
    return shutil.which("docker")


@pytest.fixture(scope="session")
def test_image(docker_daemon: str, pytestconfig: pytest.Config) -> str:
    """The name of a local image, pedl-test-task:<key>: Debian bookworm's python3 (3.11) with
    determined 0.38.1 and its dependencies, torch and torchvision, and pedl (`import determined, torch,
    pedl.core` works)."""
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")

    def log(line: str) -> None:  # a build takes minutes: say what it does, past pytest's capture,
        with (cache_dir() / "build.log").open("a") as out:  # and in a file (xdist hides its workers' output)
            out.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}\n")
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            print(f"[pedl test image] {line}", file=sys.stderr, flush=True)

    with _timeout_paused():
        try:
            return ensure_test_image(log)
        except ImageUnavailable as exc:
            _unavailable(str(exc))


def _main(argv: Iterable[str]) -> int:
    """`python -m tests.support.docker`: build the image (`make docker` runs this) and print its name."""
    del argv
    return docker_base.build_command(ensure_test_image, docker_error())


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
