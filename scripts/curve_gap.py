"""How much faster each replay variant learns than uniform, seed against seed: see comparison/curve_gap.py."""

from comparison.curve_gap import curve_gap_main

if __name__ == "__main__":
    curve_gap_main()
