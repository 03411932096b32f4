"""Every operator verb opens `MODULE:APP` or `--url URL`, speaks `--json`, and exits 2 on a refusal
and 1 when the backend cannot be reached."""

from __future__ import annotations

import json
import socket
from typing import TYPE_CHECKING

import pytest

from xjobs_cli import jobs_cli
from xjobs_cli.main import main

if TYPE_CHECKING:
    from conftest import Ops

VERBS = [
    ["jobs", "list"],
    ["jobs", "show"],
    ["jobs", "cancel"],
    ["jobs", "retry"],
    ["jobs", "promote"],
    ["jobs", "remove"],
    ["jobs", "pause"],
    ["jobs", "resume"],
    ["queues", "list"],
    ["queues", "pause"],
    ["queues", "resume"],
    ["tasks", "list"],
    ["tasks", "pause"],
    ["tasks", "resume"],
    ["tasks", "trigger"],
    ["workers", "list"],
    ["stats"],
]


@pytest.mark.parametrize("verb", VERBS, ids=" ".join)
def test_every_operator_verb_takes_an_app_or_a_url_and_json(
    verb: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*verb, "--help"]) == 0
    out = capsys.readouterr().out
    for flag in ("MODULE:APP", "--url", "--json"):
        assert flag in out


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port  # free now, and nothing listens on it


def test_an_unreachable_backend_exits_1_with_its_code(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"postgresql://postgres@127.0.0.1:{_free_port()}/postgres"

    code = main(["jobs", "list", "--url", url, "--json"])

    captured = capsys.readouterr()
    assert (code, captured.out) == (1, "")
    assert json.loads(captured.err)["error"]["code"] == "XJOBS_BACKEND_UNAVAILABLE"


def test_an_unreachable_backend_without_json_is_a_coded_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"redis://127.0.0.1:{_free_port()}/0"

    code = main(["queues", "list", "--url", url])

    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("error: XJOBS_BACKEND_UNAVAILABLE: ")
    assert "Traceback" not in err


def test_an_unknown_scheme_is_a_refusal(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["jobs", "list", "--url", "nosuchdb://x", "--json"])

    assert code == 2
    assert json.loads(capsys.readouterr().err)["error"]["code"] == "XJOBS_BACKEND_UNKNOWN"


def test_an_app_and_a_url_together_are_refused(memory_ops: Ops) -> None:
    result = memory_ops.cli("jobs list", "--url", memory_ops.url)

    assert result.code == 2
    assert result.error["code"] == "XJOBS_TARGET_INVALID"


@pytest.mark.parametrize("argv", [["jobs", "list"], ["jobs", "show", "some-id"], ["stats"]])
def test_no_app_and_no_url_is_refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code = main([*argv, "--json"])

    assert code == 2
    error = json.loads(capsys.readouterr().err)["error"]
    assert error["code"] == "XJOBS_TARGET_INVALID"
    assert "MODULE:APP" in error["message"]


def test_an_app_that_does_not_load_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["jobs", "list", "cli_target_no_such_module:app", "--json"])

    assert code == 2
    assert json.loads(capsys.readouterr().err)["error"]["code"] == "XJOBS_APP_LOAD"


def test_a_usage_error_with_json_is_a_json_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["jobs", "list", "--url", "memory://", "--limit", "many", "--json"])

    captured = capsys.readouterr()
    assert (code, captured.out) == (2, "")
    error = json.loads(captured.err)["error"]
    assert error["code"] == "XJOBS_USAGE"
    assert "--limit" in error["message"]


def test_a_usage_error_without_json_prints_the_usage(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["jobs", "frobnicate"])

    assert code == 2
    assert "usage: xjobs jobs" in capsys.readouterr().err


def test_an_unexpected_error_with_json_exits_1_with_a_json_error(
    memory_ops: Ops, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(*args: object) -> None:
        raise RuntimeError("the disk is on fire")

    monkeypatch.setattr(jobs_cli, "_list_page", broken)

    result = memory_ops.cli("jobs list")

    assert (result.code, result.out) == (1, "")
    assert result.error == {
        "code": "XJOBS_UNEXPECTED",
        "message": "RuntimeError: the disk is on fire",
    }


def test_an_unexpected_error_without_json_keeps_its_traceback(
    memory_ops: Ops, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(*args: object) -> None:
        raise RuntimeError("the disk is on fire")

    monkeypatch.setattr(jobs_cli, "_list_page", broken)

    with pytest.raises(RuntimeError, match="on fire"):
        memory_ops.cli("jobs list", json=False)
