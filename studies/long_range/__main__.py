"""``python -m studies.long_range``: see the package docstring."""

import sys

from studies.long_range import main

sys.exit(main())
