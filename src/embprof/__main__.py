"""``python -m embprof``: the same as the ``embprof`` command."""

import sys

from embprof.cli import main

sys.exit(main())
