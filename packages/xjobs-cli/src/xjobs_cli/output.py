"""What an operator command prints: one versioned JSON document or readable text, and its refusals.

With `--json`, stdout carries exactly one document, `{"version": 1, "kind": "<noun>.<verb>", …}`,
and stderr carries nothing but, on a refusal, one `{"error": {"code": …, "message": …}}` object.
Text is rendered from the same data the document holds, so the two never disagree.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from typing import Any

from xjobs import XJobsError
from xjobs.operate.shapes import document
from xjobs.operate.verbs import is_refusal

EXIT_OK = 0
EXIT_FAILED = 1  # the backend could not be reached or failed, or an error nobody anticipated
EXIT_REFUSED = 2  # bad input, or a verb the backend refused
EXIT_INTERRUPTED = 130

Body = Mapping[str, Any]


def emit(as_json: bool, kind: str, body: Body, text: Callable[[Body], str]) -> None:
    """Print `body` as the `kind` document (`--json`) or as the text `text` renders from it."""
    if as_json:
        print(json.dumps(document(kind, body), indent=2))
    else:
        rendered = text(body)
        if rendered:
            print(rendered)


def error_object(exc: XJobsError) -> dict[str, Any]:
    """A refusal as JSON: its stable code and its message."""
    return {"code": exc.code, "message": exc.message}


def exit_code(exc: XJobsError) -> int:
    """1 when the system failed (unreachable backend, unexpected error), 2 when the input was refused."""
    return EXIT_REFUSED if is_refusal(exc) else EXIT_FAILED


def print_error(as_json: bool, code: str, message: str) -> None:
    """One refusal on stderr: `error: CODE: message`, or the JSON error object."""
    if as_json:
        print(json.dumps({"error": {"code": code, "message": message}}), file=sys.stderr)
    else:
        print(f"error: {code}: {message}", file=sys.stderr)


def report(exc: XJobsError, *, as_json: bool) -> int:
    """Print a refusal on stderr; answers its exit code."""
    print_error(as_json, exc.code, exc.message)
    return exit_code(exc)


def progress(as_json: bool, line: str) -> None:
    """A progress line on stderr; none with `--json`, whose stderr is kept for the error object."""
    if not as_json:
        print(line, file=sys.stderr, flush=True)
