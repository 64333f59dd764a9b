"""
Where a prioritized DQN's replay goes on MinAtar: the share of the stored transitions, of the priority mass and of
the sampled batches that falls on the frames that earn a reward, on those that end an episode, and on the rest, with
each kind's mean |TD error| (``sb3_per.telemetry``'s per-tag figures, the tags from ``comparison.minatar.EventTag``).

A run here is the MinAtar study's run of the same game, variant and seed (``comparison.minatar``, the same config)
over its first ``total_frames`` frames, with its stored transitions tagged: tags draw nothing and change nothing the
run computes, and the authors' exploration schedule depends on the frame alone, so it trains bit for bit as the
study's run did. ``study_run_differences`` checks that on the committed run: the moving average of the training
return must equal the study's at every frame both logged, else the report says where it does not. So the figures
explain the study's own runs (PER's Breakout win and Seaquest collapse, ReLo's and ExpectedReLo's), not runs like them.

    runs/{game}_{variant}_s{seed}/   config.json, progress.csv (SB3's logger with the replay/tag_* keys at each logged
                                     frame), returns.csv (the study's row columns)
    summary.md                       the shares at each logged frame, and the check against the study's runs
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path

import gymnasium as gym
import pandas as pd
from stable_baselines3.common.logger import configure

from comparison import checkpoints
from comparison.checkpoints import PROGRESS_FILE
from comparison.experiment import write_csv_atomically
from comparison.minatar import (
    END_EVENT,
    EVENT_KEY,
    GAMES,
    NO_EVENT,
    RETURN_COLUMNS,
    RETURNS_FILE,
    REWARD_EVENT,
    VARIANTS,
    MinAtarConfig,
    ReturnLog,
    make_model,
    make_training_env,
    register_minatar,
)
from comparison.processes import configure_torch_threads
from comparison.study import CONFIG_FILE, restart_run_dir
from sb3_per.telemetry import telemetry_key

#: The kinds of frame, in the report's order
EVENT_NAMES = {REWARD_EVENT: "reward", END_EVENT: "episode end", NO_EVENT: "other"}
#: The per-kind figures of the report, as ``sb3_per.telemetry`` names them, and their columns' titles
FIGURES = {
    "buffer_share": "stored",
    "priority_share": "priority mass",
    "sample_share": "sampled",
    "td_error": "mean abs TD error",
}
SUMMARY_FILE = "summary.md"
DEFAULT_OUT = Path("docs/results/minatar_attention")
STUDY_RUNS = Path("docs/results/minatar/runs")


def attention_config(game: str, variant: str, seed: int, total_frames: int) -> MinAtarConfig:
    """
    The study's run of ``game``, ``variant`` and ``seed`` cut at ``total_frames`` (a multiple of its log interval), with
    no greedy evaluations (they draw nothing, so the training is the same without them).

    :raises ValueError: a variant with SB3's uniform buffer (no priorities to look at), or a bad setting
    """
    if variant not in VARIANTS or not VARIANTS[variant].prioritized:
        prioritized = sorted(name for name, kind in VARIANTS.items() if kind.prioritized)
        raise ValueError(f"variant must be a prioritized one of {prioritized}, got {variant!r}")
    return MinAtarConfig(game=game, variant=variant, seed=seed, total_frames=total_frames, eval_episodes=0)


def train_attention_run(config: MinAtarConfig, run_dir: Path) -> pd.DataFrame:
    """
    Train ``config``'s run with tagged transitions into ``run_dir`` (emptied first): ``config.json``,
    ``progress.csv`` (with the replay telemetry's per-tag keys), ``returns.csv``.

    :return: its ``returns.csv`` rows
    """
    register_minatar()
    run_dir = Path(run_dir)
    restart_run_dir(config, run_dir)
    model = make_model(config, make_training_env(config, tag_events=True), tag_key=EVENT_KEY)
    model.set_logger(configure(str(run_dir), ["csv"]))
    log = ReturnLog(config, run_dir, gym.make(GAMES[config.game].env_id))
    model.learn(config.total_frames, callback=log, log_interval=None)  # type: ignore[arg-type]
    model.logger.close()
    checkpoints.remove_checkpoints(run_dir)  # the study's checkpoints, which a run here never resumes from
    rows = pd.DataFrame(log.rows, columns=list(RETURN_COLUMNS))
    write_csv_atomically(rows, run_dir / RETURNS_FILE)
    return rows


def finished_attention_run(run_dir: Path) -> tuple[MinAtarConfig, pd.DataFrame, pd.DataFrame] | None:
    """A finished run's config, returns rows and SB3 rows (None unless its config, returns and progress are there and
    its returns reach its last frame)."""
    try:
        config = MinAtarConfig.from_json((run_dir / CONFIG_FILE).read_text())
        rows = pd.read_csv(run_dir / RETURNS_FILE)
    except (OSError, ValueError, pd.errors.EmptyDataError):
        return None
    progress = checkpoints.read_progress(run_dir / PROGRESS_FILE)
    if rows["frame"].tolist() != config.logged_frames or len(progress) != len(rows):
        return None
    return config, rows, progress


def shares_table(progress: pd.DataFrame, frames: Sequence[int]) -> pd.DataFrame:
    """
    One row per logged frame and kind of frame with a figure: each of ``FIGURES`` from SB3's rows of a tagged run, one
    row of ``progress`` per frame of ``frames`` (NaN where the run logged none, e.g. a kind not stored yet).
    """
    records = []
    for frame, (_, row) in zip(frames, progress.iterrows(), strict=True):
        for event, name in EVENT_NAMES.items():
            record: dict[str, object] = {"frame": int(frame), "event": name}
            for stat in FIGURES:
                value = row.get(telemetry_key(event, stat), math.nan)
                record[stat] = float(value) if pd.notna(value) else math.nan
            records.append(record)
    table = pd.DataFrame.from_records(records)
    return table[table[list(FIGURES)].notna().any(axis=1)].reset_index(drop=True)


def study_run_differences(rows: pd.DataFrame, study_rows: pd.DataFrame | None) -> list[str]:
    """
    Where a run here departs from the study's committed run of its config: the frames both logged whose moving
    average of the training return (or episode count) differ, or a sentence saying there is no study run to check.
    """
    if study_rows is None:
        return ["no finished study run of this config to check it against"]
    both = rows.merge(study_rows, on="frame", suffixes=("", "_study"))
    if both.empty:
        return ["no frame logged by both"]
    differs = (both["train_return_ema"] != both["train_return_ema_study"]) | (
        both["train_episodes"] != both["train_episodes_study"]
    )
    return [f"frame {frame}: differs from the study's run" for frame in both.loc[differs, "frame"]]


def format_share(value: float) -> str:
    return "-" if math.isnan(value) else f"{100 * value:.1f}%"


def format_error(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.3g}"


def run_section(config: MinAtarConfig, progress: pd.DataFrame, differences: Sequence[str]) -> list[str]:
    """The report's lines for one run: its per-kind table at each logged frame and its check."""
    table = shares_table(progress, config.logged_frames)
    lines = [f"## {config.game}, {config.variant}, seed {config.seed}", ""]
    lines.append(
        "Same run as the study's (moving average of the training return and episode count equal at every frame both "
        "logged): " + ("yes." if not differences else "**no**: " + "; ".join(differences) + ".")
    )
    lines += [
        "",
        "| frame | frames of kind | " + " | ".join(FIGURES.values()) + " |",
        "|---|---|" + "---:|" * len(FIGURES),
    ]
    for _, row in table.iterrows():
        cells = [format_share(row[stat]) for stat in FIGURES if stat != "td_error"] + [format_error(row["td_error"])]
        lines.append(f"| {row['frame']:,} | {row['event']} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def write_attention_report(out: Path, study_runs: Path) -> Path:
    """
    ``out/summary.md`` from every finished run under ``out/runs``, each checked against the study's run of its
    config under ``study_runs`` (its ``returns.csv``).
    """
    lines = [
        "# MinAtar: where a prioritized DQN's replay goes",
        "",
        "Written by `scripts/minatar_attention.py`. Each run is the MinAtar study's run of the same game, variant and "
        "seed over its first frames, its transitions tagged by kind of frame: one whose game reward is not 0 "
        "(reward), one with no reward that ends the episode (episode end), and the rest (other). Per kind: its share "
        "of the stored transitions and of the priority mass at the logged frame, and its share of the sampled "
        "transitions and their mean |TD error| (the critic's, before the step) over the frames since the previous "
        "row.",
        "",
    ]
    runs = sorted(path for path in (out / "runs").glob("*") if path.is_dir())
    for run_dir in runs:
        finished = finished_attention_run(run_dir)
        if finished is None:
            continue
        config, rows, progress = finished
        study_dir = study_runs / config.run_name
        study_rows = pd.read_csv(study_dir / RETURNS_FILE) if (study_dir / RETURNS_FILE).exists() else None
        lines += run_section(config, progress, study_run_differences(rows, study_rows))
    path = out / SUMMARY_FILE
    path.write_text("\n".join(lines).rstrip("\n") + "\n")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """The command line of ``scripts/minatar_attention.py``: train what is not finished, then report; or report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("command", choices=("run", "report"))
    parser.add_argument("--game", choices=sorted(GAMES), default="breakout")
    parser.add_argument("--variants", nargs="+", default=["per", "relo", "expected_relo_root"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--frames", type=int, default=300_000, help="frames of each run (a multiple of 50,000)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--study-runs", type=Path, default=STUDY_RUNS, help="the MinAtar study's runs, to check against"
    )
    args = parser.parse_args(argv)
    if args.command == "run":
        configure_torch_threads(1)  # as the study's runs: one core each, beside other runs
        try:
            configs = [attention_config(args.game, variant, args.seed, args.frames) for variant in args.variants]
        except ValueError as error:
            parser.error(str(error))
        for config in configs:
            run_dir = args.out / "runs" / config.run_name
            finished = finished_attention_run(run_dir)
            if finished is not None and finished[0] == config:
                print(f"{config.run_name}: finished already")
                continue
            print(f"{config.run_name}: training {config.total_frames:,} frames", flush=True)
            train_attention_run(config, run_dir)
    print(f"report: {write_attention_report(args.out, args.study_runs)}")
    return 0
