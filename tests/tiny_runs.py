"""The command-line settings of the comparison tests' tiny training runs (tests/ is on sys.path under pytest)."""

import json


def tiny_run_argv(
    *, total_steps: int, learning_starts: int, eval_freq: int, eval_episodes: int, episode_length: int
) -> list[str]:
    """
    ``compare.py`` / ``train.py`` arguments for a run of seconds: the given step counts and evaluation episodes,
    batches of 32, 16x16 networks and episodes of ``episode_length`` steps.
    """
    return [
        "--total-steps",
        str(total_steps),
        "--learning-starts",
        str(learning_starts),
        "--eval-freq",
        str(eval_freq),
        "--eval-episodes",
        str(eval_episodes),
        "--batch-size",
        "32",
        "--net-arch",
        "16",
        "16",
        "--env-kwargs",
        json.dumps({"episode_length": episode_length}),
    ]
