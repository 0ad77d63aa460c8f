"""``faithgate`` with the test-only metric ``gate_fake`` registered (a model-free, exact metric
that reads each sentence's score from its first word), for the hostile-input suite: the same
entry point as the console script, ``faithgate.cli.main``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import gate_fakes  # noqa: E402,F401 - registers gate_fake

from faithgate.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
