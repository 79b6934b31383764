"""`python -m replicator` is the `replicator` command."""

import sys

from replicator.cli import main

sys.exit(main())
