"""`xjobs web (MODULE:APP | --url URL)`: the dashboard served alone with uvicorn (needs xjobs-web)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from xjobs import App
from xjobs.errors import ExtraMissingError
from xjobs_cli.errors import UsageError
from xjobs_cli.load import EXAMPLE, load_app
from xjobs_cli.output import EXIT_OK
from xjobs_cli.target import Subparsers, Target, resolve

PASSWORD_ENV = "XJOBS_WEB_PASSWORD"


def missing(what: str) -> ExtraMissingError:
    """The refusal of a verb whose distribution, xjobs-web, is not installed."""
    return ExtraMissingError(f"{what} is the xjobs-web distribution: pip install xjobs-web")


def app_of(target: Target) -> App:
    """The target's App, not yet open (a `--url` App declares no job and no task)."""
    # retention=None: a --url App registers nothing, not even the default purge task.
    return (
        load_app(target.spec) if target.spec is not None else App(target.url or "", retention=None)
    )


def add_target(parser: argparse.ArgumentParser) -> None:
    """`MODULE:APP` or `--url URL`, as the operator verbs take them."""
    parser.add_argument(
        "operands",
        nargs="*",
        metavar="MODULE:APP",
        help=f"the xjobs.App to open (e.g. {EXAMPLE}), unless --url is given",
    )
    parser.add_argument(
        "--url",
        default=None,
        metavar="URL",
        help="open the backend at URL with no job declarations (inputs, keys and step results withheld; no tasks)",
    )


def _options(args: argparse.Namespace) -> dict[str, Any]:
    """The dashboard's options: read-only unless --basic-auth (or --unsafe-no-auth) lets it act."""
    acts = args.basic_auth is not None or args.unsafe_no_auth
    options: dict[str, Any] = {
        "read_only": args.read_only or not acts,
        "refresh_seconds": args.refresh,
        "title": args.title,
        "allowed_hosts": args.allowed_host,
        "unsafe_no_auth": args.unsafe_no_auth,
    }
    if args.basic_auth is not None:
        password = os.environ.get(PASSWORD_ENV, "")
        if not password:
            raise UsageError(
                f"--basic-auth {args.basic_auth} needs the password in ${PASSWORD_ENV}"
            )
        try:
            from xjobs_web import basic_auth
        except ImportError as exc:
            raise missing("the dashboard") from exc
        options["auth"] = basic_auth(args.basic_auth, password)
    return options


def _run(args: argparse.Namespace) -> int:
    target = resolve(args)
    target.none()
    try:
        from xjobs_web.serve import server
    except ImportError as exc:
        raise missing("the dashboard") from exc
    options = _options(args)
    web = server(
        app_of(target),
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        path=args.path,
        **options,
    )
    if options["read_only"]:
        mode = " (read-only)" if args.read_only else " (read-only: --basic-auth USER to act)"
    else:
        mode = " (UNAUTHENTICATED: anyone who reaches it may act)" if args.unsafe_no_auth else ""
    where = f"http://{args.host}:{args.port}{args.path.rstrip('/')}/"
    print(f"xjobs web: serving {where}{mode}", file=sys.stderr, flush=True)
    web.run()
    return EXIT_OK


def add_parser(commands: Subparsers) -> argparse.ArgumentParser:
    """The `xjobs web` subparser."""
    parser = commands.add_parser(
        "web",
        help="serve the web dashboard (needs xjobs-web)",
        description="Serve the dashboard (overview, jobs, failures, tasks, workers, and the "
        "actions) with uvicorn until SIGTERM. Needs the xjobs-web distribution.",
        usage="%(prog)s (MODULE:APP | --url URL) [options]",
    )
    add_target(parser)
    parser.add_argument(
        "--host", default="127.0.0.1", help="the address to bind (default 127.0.0.1)"
    )
    parser.add_argument("--port", type=int, default=8080, help="the port (default 8080)")
    parser.add_argument(
        "--path",
        default="/",
        metavar="PATH",
        help="serve the dashboard under PATH (e.g. /_x, the default mount of a service's own "
        "server: xjobs_web.MOUNT_PATH); / redirects there (default /)",
    )
    parser.add_argument(
        "--read-only",
        action="store_true",
        help="render no action and refuse every POST with 403 (the mode without --basic-auth)",
    )
    parser.add_argument(
        "--basic-auth",
        default=None,
        metavar="USER",
        help=f"require HTTP basic auth as USER, with the password in ${PASSWORD_ENV}; "
        "the dashboard may then act",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="answer this Host name too (NAME or NAME:PORT; repeatable); only loopback names "
        "otherwise",
    )
    parser.add_argument(
        "--unsafe-no-auth",
        action="store_true",
        help="serve without authentication, able to act: anyone who reaches it may move jobs",
    )
    parser.add_argument(
        "--refresh",
        type=int,
        default=5,
        metavar="SECONDS",
        help="live refresh of the pages every SECONDS (0: never; default 5)",
    )
    parser.add_argument("--title", default="xjobs", help="the name in the page header")
    parser.set_defaults(run=_run)
    return parser
