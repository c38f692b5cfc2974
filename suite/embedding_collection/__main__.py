"""``torchrun ... -m suite.embedding_collection [flags]``: one rank of the benchmark."""

import sys

from .run import main

sys.exit(main())
