"""Train sb3_per.SAC once on the pairs-trading env (uniform or prioritized replay). See --help."""

import _repository  # noqa: F401  (the clone on sys.path: first, before comparison and envs)

from comparison.cli import train_main

if __name__ == "__main__":
    train_main()
