"""The compat tests need the real det CLI (determined==0.38.1) in its own venv, made by `make det-venv`.
Without it they skip, except under CI (`CI` set), where they fail: a skipped suite hides regressions."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

DET_VENV_ENV = "PEDL_DET_VENV"  # another venv than the checkout's .venv-det (the Makefile's DET_VENV)


def det_venv() -> Path:
    return Path(os.environ.get(DET_VENV_ENV) or Path(__file__).parents[2] / ".venv-det")


def det_missing() -> str | None:
    """None when the det CLI is installed, else what is missing and how to install it."""
    det = det_venv() / "bin" / "det"
    if det.exists():
        return None
    return (
        f"determined==0.38.1 is not installed at {det} (`make det-venv` could not install it; "
        f"retry with: rm -rf {det_venv()} && make det-venv)"
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("compat") is None:
        return
    missing = det_missing()
    if missing is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{missing}. Under CI the compat tests must run, not skip.", pytrace=False)
    pytest.skip(missing)
