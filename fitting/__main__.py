"""``python -m fitting``: refit the serving model on the fixture (fitting/fit.py)."""

import sys

from fitting.fit import main

if __name__ == "__main__":
    sys.exit(main())
