"""`python -m xjobs_cli`: the same command line as the `xjobs` script."""

from __future__ import annotations

from xjobs_cli.main import main

raise SystemExit(main())
