"""``python -m ucudnn.cli``: the same as the ``ucudnn`` console script."""

import sys

from ucudnn.cli import main

sys.exit(main())
