"""make test runs its browser and serial passes over the paths in tests/conftest.PASS_PATHS only, so a
test marked for one of those passes anywhere else would run in none of them: collection refuses it."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

from tests.conftest import PASS_PATHS, _outside_its_pass, require_postgres


class _Item:
    def __init__(self, nodeid: str, *markers: str) -> None:
        self.nodeid, self._markers = nodeid, markers

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self._markers else None


def test_a_browser_or_serial_test_outside_its_pass_is_named() -> None:
    items = [
        _Item("tests/browser/test_webui.py::test_a", "browser"),
        _Item("tests/e2e/test_postgres_restart_e2e.py::test_b", "e2e", "serial"),
        _Item("tests/master/api/test_x.py::test_c", "browser"),
        _Item("tests/e2e/test_other.py::test_d", "serial"),
        _Item("tests/master/test_y.py::test_e"),
    ]
    stray = _outside_its_pass(items)
    assert len(stray) == 2
    assert "tests/master/api/test_x.py::test_c is marked browser" in stray[0] and "tests/browser/" in stray[0]
    assert "tests/e2e/test_other.py::test_d is marked serial" in stray[1]


def test_the_makefile_passes_collect_the_same_paths() -> None:
    makefile = (Path(__file__).parents[1] / "Makefile").read_text()
    for marker, path in PASS_PATHS.items():
        declared = re.search(rf"^{marker.upper()}_TESTS := (\S+)$", makefile, re.M)
        assert declared, f"Makefile declares no {marker.upper()}_TESTS"
        assert path.rstrip("/") == declared.group(1).rstrip("/")


def test_api_modules_outside_the_list_run_on_postgresql_alone_and_the_listed_on_both() -> None:
    from tests.master.conftest import API_MODULES_ON_BOTH_DATABASES, pytest_generate_tests

    def markers(module: str, fixtures: tuple[str, ...] = ("db_kind", "client")) -> list[object]:
        added: list[object] = []
        metafunc = SimpleNamespace(
            module=SimpleNamespace(__name__=module),
            fixturenames=list(fixtures),
            definition=SimpleNamespace(add_marker=added.append),
        )
        pytest_generate_tests(metafunc)  # type: ignore[arg-type]
        return added

    [only] = markers("tests.master.api.test_auth")
    assert (only.args, only.kwargs) == (("db_kind", ["postgres"]), {"indirect": True})  # type: ignore[attr-defined]
    assert markers("tests.master.api.test_experiment_listing") == []  # listed: both, from the fixture's params
    assert markers("tests.master.identity.test_users") == []  # outside tests/master/api: both
    assert markers("tests.master.api.test_auth", ("client",)) == []  # no database at all
    # a renamed module would otherwise drop to PostgreSQL alone without a word
    api = Path(__file__).parent / "master" / "api"
    assert {name for name in API_MODULES_ON_BOTH_DATABASES if not (api / f"{name}.py").exists()} == set()


def test_the_connection_count_sees_this_processs_connections_to_postgresql() -> None:
    import psycopg

    from tests.support.databases import open_postgres_connections, pg_admin_dsn

    require_postgres()
    before = open_postgres_connections()
    with psycopg.connect(pg_admin_dsn()) as a, psycopg.connect(pg_admin_dsn()):
        assert open_postgres_connections() == before + 2
        a.close()
        assert open_postgres_connections() == before + 1
    assert open_postgres_connections() == before
