"""`python -m bench`: the whole benchmark (see `python -m bench --help`)."""

import sys

from bench.run import main

sys.exit(main())
