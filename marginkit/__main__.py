"""``python -m marginkit``: the same program as the ``marginkit`` command."""
import sys

from .cli import main

sys.exit(main())
