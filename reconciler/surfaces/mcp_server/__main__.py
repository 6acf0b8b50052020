"""``python -m reconciler.surfaces.mcp_server``: the same as ``tpu-mcp``."""

import sys

from reconciler.surfaces.mcp_server import main

sys.exit(main())
