"""``python -m parpass``: the ``parpass`` command."""

import sys

from parpass.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
