"""
Where a prioritized DQN's replay goes on MinAtar (comparison/minatar_attention.py): the MinAtar study's runs of one
game and seed, over their first frames, with each stored transition tagged by kind of frame (reward, episode end,
other), and the share of the priority mass and of the batches each kind gets.

    python scripts/minatar_attention.py run --game breakout --seed 0 --frames 300000
        [--variants per relo expected_relo_root]
    python scripts/minatar_attention.py report                   # docs/results/minatar_attention/summary.md
"""

import sys

import _repository  # noqa: F401  (the clone on sys.path: first, before comparison and envs)

from comparison.minatar_attention import main

if __name__ == "__main__":
    sys.exit(main())
