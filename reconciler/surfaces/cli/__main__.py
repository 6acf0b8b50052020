"""``python -m reconciler.surfaces.cli``."""

import sys

from reconciler.surfaces.cli import main

sys.exit(main())
