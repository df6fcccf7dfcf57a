"""``python -m studies.toy_study``: see the package docstring."""

import sys

from studies.toy_study import main

sys.exit(main())
