"""``python -m reconciler`` is ``tpu-reconciler``."""

import sys

from reconciler.surfaces.cli import main

sys.exit(main())
