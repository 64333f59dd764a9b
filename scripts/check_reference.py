"""Check that today's code reproduces the committed reference runs byte for byte. See --help."""

import sys

from comparison.reference import check_main

if __name__ == "__main__":
    sys.exit(check_main())
