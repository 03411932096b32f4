"""The site's generated reference misses nothing: every public name has a docstring and a page,
every error code an entry, every `xjobs` command its `--help`, every metric its row.

The generator is docs/hooks/reference.py, the MkDocs hook the `docs` nox session builds with;
these tests import it without MkDocs.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import inspect
import os
import pkgutil
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from xjobs import XJobsError
from xjobs.observe.metrics import METRIC_NAMES
from xjobs_cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "xjobs_docs_reference", ROOT / "docs/hooks/reference.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


REFERENCE = _generator()
LIBRARIES = [module for _, module in REFERENCE.DISTRIBUTIONS]
# every top-level module the workspace's distributions ship
PACKAGES = sorted(
    {path.name for path in ROOT.glob("packages/*/src/*") if (path / "__init__.py").exists()}
)


# ---------------------------------------------------------------------------------------------
# Docstrings of the public names


def _data_docstring(module: ModuleType, name: str) -> str | None:
    """The string literal right after `name`'s assignment, in the module that assigns it."""
    source = inspect.getsource(module)
    tree = ast.parse(source)
    for node in tree.body:
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and any((alias.asname or alias.name) == name for alias in node.names)
        ):
            return _data_docstring(importlib.import_module(node.module), name)
    for node, after in zip(tree.body, tree.body[1:], strict=False):
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
                return str(after.value.value)
            return None
    return None


def _is_data(value: object) -> bool:
    return not (inspect.isclass(value) or inspect.isroutine(value) or inspect.ismodule(value))


def _undocumented(module: ModuleType) -> Iterator[str]:
    """Each public name of `module`, and each public member of a public class, with no docstring."""
    for name in REFERENCE.public_names(module):
        value = getattr(module, name)
        if _is_data(value):  # a constant or a type alias: the string literal under it
            doc = _data_docstring(module, name)
        else:
            doc = value.__dict__.get("__doc__") if inspect.isclass(value) else value.__doc__
        if not (doc or "").strip():
            yield name
        if not inspect.isclass(value):
            continue
        for member, attribute in vars(value).items():
            if member.startswith("_"):
                continue
            function = attribute.fget if isinstance(attribute, property) else attribute
            function = getattr(function, "__func__", function)
            if inspect.isroutine(function) and not (function.__doc__ or "").strip():
                yield f"{name}.{member}"


@pytest.mark.parametrize("module_name", LIBRARIES)
def test_every_public_name_has_a_docstring(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert (module.__doc__ or "").strip(), f"{module_name} has no module docstring"
    assert list(_undocumented(module)) == [], f"{module_name}: public names with no docstring"


@pytest.mark.parametrize("module_name", LIBRARIES)
def test_every_public_name_has_its_api_entry(module_name: str) -> None:
    page = REFERENCE.pages()[f"reference/api/{module_name}.md"]
    module = importlib.import_module(module_name)
    missing = [n for n in REFERENCE.public_names(module) if f"::: {module_name}.{n}\n" not in page]
    assert missing == []


def test_every_distribution_with_a_module_has_an_api_page() -> None:
    assert set(PACKAGES) - set(LIBRARIES) == {"xjobs_cli"}  # its reference is the command's page


def test_an_undocumented_name_is_found() -> None:
    module = ModuleType("sample", "A sample.")
    exec(  # a made-up module: a documented and an undocumented function
        "def said():\n    'Said.'\ndef bare(): pass\n",
        module.__dict__,
    )
    module.__all__ = ["said", "bare"]  # type: ignore[attr-defined]
    assert list(_undocumented(module)) == ["bare"]


# ---------------------------------------------------------------------------------------------
# Error codes


def _every_module() -> Iterator[str]:
    for package in PACKAGES:
        root = importlib.import_module(package)
        yield package
        for found in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
            if not found.name.endswith(".__main__"):  # `python -m`'s entry runs the command
                yield found.name


def _every_error_class() -> list[type[XJobsError]]:
    """Every `XJobsError` subclass in any module of the workspace (errors.py or not)."""
    for name in _every_module():
        importlib.import_module(name)
    found: list[type[XJobsError]] = [XJobsError]
    for cls in found:
        found += [sub for sub in cls.__subclasses__() if sub not in found]
    return [cls for cls in found if cls.__module__.split(".")[0] in PACKAGES]


def test_every_error_class_has_its_own_docstring() -> None:
    bare = [cls.__qualname__ for cls in _every_error_class() if not cls.__dict__.get("__doc__")]
    assert bare == []


def test_every_error_class_says_what_to_do() -> None:
    silent = [
        cls.__qualname__
        for cls in _every_error_class()
        if "To do: " not in (cls.__dict__.get("__doc__") or "")
    ]
    assert silent == [], "end each refusal's docstring with a paragraph `To do: …`"


def test_every_error_class_is_in_the_error_reference() -> None:
    page = REFERENCE.errors_page()
    missing = [
        f"{cls.__module__}.{cls.__qualname__} ({cls.code})"
        for cls in _every_error_class()
        if f"## `{cls.code}`" not in page or f"`{cls.__module__}.{cls.__qualname__}`" not in page
    ]
    assert missing == [], "declare each refusal in its package's errors.py (ERROR_MODULES)"


# ---------------------------------------------------------------------------------------------
# The command line and the metrics


def _commands(words: str, parser: argparse.ArgumentParser) -> Iterator[tuple[str, str]]:
    yield words, parser.format_help()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for verb, sub in action.choices.items():
                yield from _commands(f"{words} {verb}", sub)


def test_every_cli_command_is_in_the_reference_with_its_help(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", REFERENCE.HELP_COLUMNS)
    page = REFERENCE.cli_page()
    expected = list(_commands("xjobs", build_parser()))
    assert len(expected) > 20
    missing = [
        words
        for words, help in expected
        if f"## `{words}`\n\n```text\n{help.rstrip()}\n```" not in page
    ]
    assert missing == []
    assert os.environ["COLUMNS"] == REFERENCE.HELP_COLUMNS


def test_every_metric_is_in_the_reference() -> None:
    page = REFERENCE.metrics_page()
    assert [name for name in METRIC_NAMES if f"| `{name}` |" not in page] == []


def test_the_cli_page_shows_no_value_of_the_build_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the page is published: a parser default read from the environment would publish the
    # build machine's URL or password
    secret = "postgresql://ci:hunter2@db.internal/app"
    for name in ("XJOBS_URL", "XJOBS_WEB_PASSWORD", "XJOBS_ENVIRONMENT"):
        monkeypatch.setenv(name, secret)
    assert secret not in REFERENCE.cli_page()
