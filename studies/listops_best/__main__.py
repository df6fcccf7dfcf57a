"""``python -m studies.listops_best``: see the package docstring."""

import sys

from studies.listops_best import main

sys.exit(main())
