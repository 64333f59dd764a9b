"""Train sb3_per.SAC once on the pairs-trading env (uniform or prioritized replay). See --help."""

from comparison.cli import train_main

if __name__ == "__main__":
    train_main()
