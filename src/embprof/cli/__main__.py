"""``python -m embprof.cli``: the same as the ``embprof`` command."""

import sys

from embprof.cli import main

sys.exit(main())
