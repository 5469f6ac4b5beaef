"""pyproject.toml stays in the form current setuptools builds without deprecation warnings."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).parents[1] / "pyproject.toml"


def test_license_is_an_spdx_string_and_the_build_requires_a_setuptools_that_reads_it() -> None:
    data = tomllib.loads(PYPROJECT.read_text())
    # a table ({text = ...}) makes every `pip install -e .` print a deprecation warning three times
    assert data["project"]["license"] == "Apache-2.0"
    (setuptools,) = [r for r in data["build-system"]["requires"] if r.startswith("setuptools")]
    match = re.fullmatch(r"setuptools>=(\d+)(\.\d+)*", setuptools)
    assert match and int(match.group(1)) >= 77, setuptools  # PEP 639 license strings: setuptools 77
