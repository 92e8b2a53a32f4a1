"""Entry point for ``python3 -m ferrofs_bench``."""

import sys

from .cli import main

sys.exit(main())
