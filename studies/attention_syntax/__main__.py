"""``python -m studies.attention_syntax``: see the package docstring."""

import sys

from studies.attention_syntax import main

sys.exit(main())
