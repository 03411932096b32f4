"""`load_app("module:attr")` finds an `xjobs.App` and refuses any other spec: `XJOBS_APP_LOAD`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import xjobs
from xjobs.errors import AppLoadError
from xjobs.factories.purge import PURGE_JOB
from xjobs_cli.load import load_app

APP_MODULE = (
    "import xjobs\napp = xjobs.App()\nholder = type('Holder', (), {'app': app})\nnot_an_app = 42\n"
)


def _refusal(spec: str) -> AppLoadError:
    with pytest.raises(AppLoadError) as caught:
        load_app(spec)
    assert caught.value.code == "XJOBS_APP_LOAD"
    return caught.value


def test_loads_an_app_from_a_module_in_the_working_directory(app_dir: Path) -> None:
    (app_dir / "cli_load_ok.py").write_text(APP_MODULE)

    loaded = load_app("cli_load_ok:app")

    assert isinstance(loaded, xjobs.App)
    assert sys.path[0] == str(app_dir)


def test_a_dotted_attribute_is_followed(app_dir: Path) -> None:
    (app_dir / "cli_load_dotted.py").write_text(APP_MODULE)

    assert load_app("cli_load_dotted:holder.app") is load_app("cli_load_dotted:app")


@pytest.mark.parametrize("spec", ["cli_load_ok", "cli_load_ok:", ":app", ""])
def test_a_spec_without_module_and_attribute_is_refused(spec: str) -> None:
    assert "MODULE:APP" in _refusal(spec).message


def test_a_file_path_is_refused_with_the_module_name_to_use() -> None:
    assert "myapp.main:app" in _refusal("myapp/main.py:app").message


@pytest.mark.usefixtures("app_dir")
def test_a_missing_module_is_refused() -> None:
    assert "not found" in _refusal("cli_load_no_such_module:app").message


def test_a_module_that_raises_on_import_is_refused(app_dir: Path) -> None:
    (app_dir / "cli_load_broken.py").write_text("raise RuntimeError('boom at import')\n")

    error = _refusal("cli_load_broken:app")

    assert "RuntimeError: boom at import" in error.message
    assert isinstance(error.__cause__, RuntimeError)


def test_a_module_whose_own_import_is_missing_names_that_import(app_dir: Path) -> None:
    (app_dir / "cli_load_missing_dep.py").write_text("import cli_load_not_installed_dep\n")

    assert "cli_load_not_installed_dep" in _refusal("cli_load_missing_dep:app").message


def test_a_missing_attribute_is_refused(app_dir: Path) -> None:
    (app_dir / "cli_load_no_attr.py").write_text(APP_MODULE)

    assert "no attribute 'application'" in _refusal("cli_load_no_attr:application").message


def test_an_attribute_that_is_not_an_app_is_refused(app_dir: Path) -> None:
    (app_dir / "cli_load_not_app.py").write_text(APP_MODULE)

    assert "int, not an xjobs.App" in _refusal("cli_load_not_app:not_an_app").message


def test_the_demo_app_loads_with_its_six_jobs() -> None:
    loaded = load_app("xjobs_cli.demo:app")

    assert PURGE_JOB in loaded.jobs  # retention is on by default
    assert sorted(n for n in loaded.jobs if n != PURGE_JOB) == [
        "call_partner_api",
        "charge_card",
        "import_catalog",
        "resize_image",
        "send_welcome_email",
        "sync_inventory",
    ]
