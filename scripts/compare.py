"""PER-SAC vs uniform SAC over seeds on the pairs-trading env, with baselines and a report. See --help."""

from comparison.cli import compare_main

if __name__ == "__main__":
    compare_main()
