"""python3 -m resilient_report: the command line (cli.main)."""

import sys

from .cli import main

sys.exit(main())
