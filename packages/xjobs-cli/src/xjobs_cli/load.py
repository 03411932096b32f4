"""`load_app("package.module:attr")`: find the `xjobs.App` a command runs, or refuse clearly.

The current directory goes first on `sys.path` (as uvicorn does), so `xjobs worker app:app` finds
`./app.py` whichever way the command was started.
"""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType

from xjobs import App
from xjobs.errors import AppLoadError

EXAMPLE = "myapp.main:app"


def _put_cwd_first() -> None:
    cwd = os.getcwd()
    if not sys.path or sys.path[0] not in (cwd, ""):
        sys.path.insert(0, cwd)


def _split(spec: str) -> tuple[str, str]:
    module_name, colon, attr = spec.partition(":")
    if not colon or not module_name.strip() or not attr.strip():
        raise AppLoadError(f"{spec!r} is not MODULE:APP; name a module and its App, e.g. {EXAMPLE}")
    if module_name.endswith(".py"):
        raise AppLoadError(
            f"{spec!r} names a file; name the module instead "
            f"(e.g. {module_name[:-3].replace('/', '.')}:{attr})"
        )
    return module_name.strip(), attr.strip()


def _import(module_name: str) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (module_name == missing or module_name.startswith(missing + ".")):
            raise AppLoadError(
                f"module {module_name!r} was not found (looked in {os.getcwd()} and on sys.path)"
            ) from exc
        raise AppLoadError(f"module {module_name!r} failed to import: {exc}") from exc
    except Exception as exc:
        raise AppLoadError(
            f"module {module_name!r} failed to import: {type(exc).__name__}: {exc}"
        ) from exc


def load_app(spec: str) -> App:
    """The `xjobs.App` that `spec` ("package.module:attr", attr may be dotted) names."""
    module_name, attr = _split(spec)
    _put_cwd_first()
    found: object = _import(module_name)
    for part in attr.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise AppLoadError(f"module {module_name!r} has no attribute {attr!r}") from None
    if not isinstance(found, App):
        raise AppLoadError(
            f"{spec!r} is a {type(found).__name__}, not an xjobs.App; point it at the App instance"
        )
    return found
