"""The base layer of the task test image: a Debian bookworm root filesystem made by debootstrap and
`docker import`ed as pedl-test-base:<key> (tests/support/docker.py adds the layers above it).

Only the standard library: `make test` runs `python3 -m tests.support.docker_base` before the
venvs exist, so that debootstrap (a minute of downloads) overlaps their installs.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import inspect
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

SUITE = "bookworm"  # its python3 is 3.11: the venvs' compiled wheels load
PACKAGES = ("python3", "ca-certificates", "procps")
DEFAULT_MIRROR = "http://deb.debian.org/debian"
SITE_DIR = "usr/local/lib/python3.11/dist-packages"  # on Debian's python3 path; apt never writes it
IMAGE_ENV = ("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8")
SLIMMED = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale", "var/cache/apt", "var/lib/apt/lists")
Log = Callable[[str], None]


class ImageUnavailable(Exception):
    """The image cannot be built here (no root, no debootstrap): the tests skip, or fail under CI."""


class ImageBuildError(Exception):
    """A build step failed; the message says which and how."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(os.environ.get("PEDL_TEST_IMAGE_CACHE") or Path(base) / "pedl-test-images")


# -- the Debian mirror apt uses ---------------------------------------------------------------------


def debian_mirror(apt_dir: Path = Path("/etc/apt")) -> str:
    """The mirror of apt's sources that serves bookworm (else any Debian release's main suite),
    from one-line `.list` files and deb822 `.sources` files; $PEDL_TEST_DEBIAN_MIRROR overrides."""
    if override := os.environ.get("PEDL_TEST_DEBIAN_MIRROR"):
        return override
    sources: list[tuple[str, list[str]]] = []  # (uri, suites) in apt's reading order
    lists = [apt_dir / "sources.list", *sorted((apt_dir / "sources.list.d").glob("*.list"))]
    for path in lists:
        if path.is_file():
            sources += _one_line_sources(path.read_text(errors="replace"))
    for path in sorted((apt_dir / "sources.list.d").glob("*.sources")):
        sources += _deb822_sources(path.read_text(errors="replace"))
    for uri, suites in sources:
        if SUITE in suites:
            return uri
    for uri, suites in sources:  # a newer Debian host: its mirror serves bookworm too
        if "/debian" in uri and any("-" not in suite for suite in suites):
            return uri
    return DEFAULT_MIRROR


def _one_line_sources(text: str) -> list[tuple[str, list[str]]]:
    found = []
    for line in text.splitlines():
        match = re.match(r"\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)", line.split("#", 1)[0])
        if match:
            found.append((match[1].rstrip("/"), [match[2]]))
    return found


def _deb822_sources(text: str) -> list[tuple[str, list[str]]]:
    found = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        key = None
        for line in stanza.splitlines():
            if line.startswith("#"):
                continue
            if line[:1].isspace() and key:
                fields[key] += " " + line.strip()
            elif ":" in line:
                key, value = line.split(":", 1)
                key = key.strip().lower()
                fields[key] = value.strip()
        if "deb" in fields.get("types", "").split() and fields.get("enabled", "yes").lower() != "no":
            found += [(uri.rstrip("/"), fields.get("suites", "").split()) for uri in fields.get("uris", "").split()]
    return found


# -- the key ------------------------------------------------------------------------------------------


def _digest(*parts: str | bytes) -> str:
    hasher = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        hasher.update(len(data).to_bytes(8, "big") + data)
    return hasher.hexdigest()[:16]


def base_key() -> str:
    """The debootstrap recipe: the suite, the packages, and the code that runs it."""
    return _digest(SUITE, ",".join(PACKAGES), *SLIMMED, *IMAGE_ENV, inspect.getsource(_build_rootfs_tarball))


# -- docker ---------------------------------------------------------------------------------------------


def _docker(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise ImageBuildError(f"docker {args[0]} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done


def image_exists(name: str) -> bool:
    return (
        subprocess.run(
            ["docker", "image", "inspect", name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        ).returncode
        == 0
    )


# -- the build ----------------------------------------------------------------------------------------


def _remove_tree(path: Path) -> None:
    """Remove a build directory, unmounting first what an interrupted debootstrap left mounted in it."""
    if not path.exists():
        return
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    for mount in sorted((m for m in mounts if m.startswith(f"{path}/")), reverse=True):
        subprocess.run(["umount", "-l", mount], capture_output=True)
    subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=False)


def _build_rootfs_tarball(tarball: Path, log: Log) -> None:
    """debootstrap a minimal bookworm with PACKAGES, slimmed, into `tarball`."""
    if os.geteuid() != 0:
        raise ImageUnavailable("building the task test image needs root (debootstrap): run `make docker` as root once")
    if not shutil.which("debootstrap"):
        raise ImageUnavailable("debootstrap is missing: apt-get install debootstrap (`make docker` does as root)")
    mirror = debian_mirror()
    for stale in cache_dir().glob("work-*"):  # an interrupted build's (the build lock is held)
        _remove_tree(stale)
    work = cache_dir() / f"work-{os.getpid()}"
    rootfs = work / "rootfs"
    debootstrap_log = cache_dir() / "debootstrap.log"
    log(f"debootstrap {SUITE} with {','.join(PACKAGES)} from {mirror} (a few minutes; log: {debootstrap_log})")
    try:
        with debootstrap_log.open("w") as out:
            done = subprocess.run(
                ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, str(rootfs), mirror],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        if done.returncode != 0:
            tail = debootstrap_log.read_text(errors="replace").strip().splitlines()[-5:]
            raise ImageBuildError(
                f"debootstrap failed (exit status {done.returncode}; {debootstrap_log}):\n" + "\n".join(tail)
            )
        for part in SLIMMED:
            shutil.rmtree(rootfs / part, ignore_errors=True)
        (rootfs / SITE_DIR).mkdir(parents=True, exist_ok=True)
        log(f"packing the root filesystem into {tarball}")
        partial = tarball.with_suffix(".partial")
        subprocess.run(["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(partial), "."], check=True)
        partial.rename(tarball)
    finally:
        _remove_tree(work)


def _ensure_base(log: Log) -> str:
    key = base_key()
    name = f"pedl-test-base:{key}"
    if image_exists(name):
        return name
    tarball = cache_dir() / f"base-{key}.tar"
    if not tarball.exists():
        _build_rootfs_tarball(tarball, log)
        for old in cache_dir().glob("base-*.tar"):
            if old != tarball:
                old.unlink(missing_ok=True)
    log(f"docker import {tarball.name} as {name}")
    changes = [arg for env in IMAGE_ENV for arg in ("--change", f"ENV {env}")]
    _docker("import", *changes, str(tarball), name)
    return name


@contextlib.contextmanager
def _build_lock() -> Iterator[None]:
    """One build at a time on this machine (pytest-xdist workers, parallel sessions)."""
    cache_dir().mkdir(parents=True, exist_ok=True)
    with (cache_dir() / "build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure_base(log: Log = print) -> str:
    """The name of the base image, built first (under the build lock) if no image of its key exists."""
    name = f"pedl-test-base:{base_key()}"
    if image_exists(name):
        return name
    with _build_lock():
        return _ensure_base(log)


def build_command(build: Callable[[Log], str], unavailable: str | None) -> int:
    """The command line of an image builder: build, print each step and the image's name; 1 on failure."""
    if unavailable:
        print(f"Docker is not available: {unavailable}", file=sys.stderr)
        return 1
    try:
        name = build(lambda line: print(f"[pedl test image] {line}", flush=True))
        print(f"[pedl test image] {name}")
    except (ImageUnavailable, ImageBuildError) as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


def _main(argv: Iterable[str]) -> int:
    """`python3 -m tests.support.docker_base`: build the base image (`make docker` runs this first)."""
    del argv
    return build_command(ensure_base, None if shutil.which("docker") else "the docker command is not installed")


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
