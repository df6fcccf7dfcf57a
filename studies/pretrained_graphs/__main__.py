"""``python -m studies.pretrained_graphs``: see the package docstring."""

import sys

from studies.pretrained_graphs import main

sys.exit(main())
