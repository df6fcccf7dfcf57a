"""``python -m studies.graph_probe``: see the package docstring."""

import sys

from studies.graph_probe import main

sys.exit(main())
