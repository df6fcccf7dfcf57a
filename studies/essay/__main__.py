"""``python -m studies.essay``: see the package docstring."""

import sys

from studies.essay import main

sys.exit(main())
