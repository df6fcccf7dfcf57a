"""``python -m studies.pretrained_syntax``: see the package docstring."""

import sys

from studies.pretrained_syntax import main

sys.exit(main())
