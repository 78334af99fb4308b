"""``python -m idaudit``: the ``idaudit`` command, where its console script is not on PATH."""

import sys

from idaudit.cli import main

if __name__ == "__main__":
    sys.exit(main())
