"""``python -m studies.prune_heads``: see the package docstring."""

import sys

from studies.prune_heads import main

sys.exit(main())
