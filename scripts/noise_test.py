"""The noise test: each replay scheme's attention on pure-noise transitions, and its learning speed. See --help."""

import _repository  # noqa: F401  (the clone on sys.path: first, before comparison and envs)

from comparison.noise_test import noise_test_main

if __name__ == "__main__":
    noise_test_main()
