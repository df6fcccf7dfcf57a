"""``python -m studies.soft_syntax``: see the package docstring."""

import sys

from studies.soft_syntax import main

sys.exit(main())
