"""``python -m faithgate`` runs the CLI."""

import sys

from faithgate.cli import main

if __name__ == "__main__":
    sys.exit(main())
