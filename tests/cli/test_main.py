"""Global options and error reporting of the `pedl` app."""

from __future__ import annotations

from typer.testing import CliRunner

from pedl.cli.auth_store import AuthStore
from pedl.cli.main import app
from tests.cli.fake_master import FakeMaster
from tests.cli.test_client import free_port


def test_connection_refused_is_one_red_line_and_exit_1() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = CliRunner().invoke(app, ["-m", url, "agent", "list"])
    assert result.exit_code == 1
    assert result.output.strip() == f"error: cannot reach the master at {url}"
    assert "Traceback" not in result.output


def test_master_from_env_accepts_host_port(master: FakeMaster, monkeypatch) -> None:
    master.route("GET", "/api/v1/agents", {"agents": []})
    monkeypatch.setenv("PEDL_MASTER", master.url.removeprefix("http://"))
    result = CliRunner().invoke(app, ["agent", "list", "--json"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "[]"


def test_invalid_master_url_is_an_error() -> None:
    result = CliRunner().invoke(app, ["-m", "ftp://h", "agent", "list"])
    assert result.exit_code == 1
    assert "invalid master URL 'ftp://h'" in result.output


def test_server_error_message_is_shown(cli, master: FakeMaster) -> None:
    master.route("GET", "/api/v1/experiments/9", (404, {"code": "not_found", "message": "experiment 9 not found"}))
    result = cli("experiment", "describe", "9")
    assert result.exit_code == 1
    assert result.output.strip() == "error: experiment 9 not found"


def test_no_arguments_shows_help() -> None:
    result = CliRunner().invoke(app, [])
    assert "experiment" in result.output and "agent" in result.output


def test_user_option_selects_the_cached_user(master: FakeMaster) -> None:
    master.route("GET", "/api/v1/agents", {"agents": []})
    token = master.issue_token("alice")
    AuthStore().set_token(master.url, "alice", token)
    result = CliRunner().invoke(app, ["-m", master.url, "-u", "alice", "agent", "list", "--json"])
    assert result.exit_code == 0, result.output
    assert master.calls("GET", "/api/v1/agents")[0].headers["authorization"] == f"Bearer {token}"


def test_det_master_env_is_a_fallback(master: FakeMaster, monkeypatch) -> None:
    master.route("GET", "/api/v1/agents", {"agents": []})
    monkeypatch.setenv("DET_MASTER", master.url)
    result = CliRunner().invoke(app, ["agent", "list", "--json"])
    assert result.exit_code == 0, result.output


def test_the_global_cert_option_and_its_variable_verify_an_https_master(tmp_path, monkeypatch) -> None:
    from tests.support.tls import https_json_server, write_tls_files

    tls = write_tls_files(tmp_path / "tls")
    with https_json_server(tls, {}) as (url, _):
        result = CliRunner().invoke(app, ["-m", url, "--cert", str(tls.other_ca), "agent", "list"])
        assert result.exit_code == 1 and "Traceback" not in result.output
        assert result.output.startswith(
            f"error: the TLS certificate of the master at {url} could not be verified against the CA in {tls.other_ca}"
        )
        monkeypatch.setenv("PEDL_MASTER_CERT", str(tmp_path / "absent.pem"))
        result = CliRunner().invoke(app, ["-m", url, "agent", "list"])
        assert result.exit_code == 1
        assert (
            result.output.strip() == f"error: cannot read the master's CA certificate {tmp_path / 'absent.pem'}: "
            "No such file or directory"
        )
