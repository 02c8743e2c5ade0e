"""``python -m streamwire``: the ``streamwire`` command (:mod:`streamwire.cli`)."""

import sys

from streamwire.cli import main

sys.exit(main())
