"""Check that today's code reproduces the committed reference runs byte for byte. See --help."""

import sys

import _repository  # noqa: F401  (the clone on sys.path: first, before comparison and envs)

from comparison.reference import check_main

if __name__ == "__main__":
    sys.exit(check_main())
