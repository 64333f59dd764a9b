"""
Command lines of ``scripts/train.py`` (one run) and ``scripts/compare.py`` (the comparison).

Only the standard library is imported with this module: ``compare.py`` checks the syntax of its command line before
it imports the experiment (torch, Stable-Baselines3, the plots: seconds), so that a mistyped command is refused at
once.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import re
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from comparison.schema import RUNS_DIR, VARIANT_NAMES
from comparison.study import holds_config, natural_number, positive_integer

if TYPE_CHECKING:
    from comparison.experiment import RunConfig


# RunConfig fields settable from both command lines: (flag, field, type, help).
_RUN_OPTIONS: tuple[tuple[str, str, Any, str], ...] = (
    ("--env-id", "env_id", str, "Gymnasium env id"),
    ("--total-steps", "total_steps", positive_integer, "env steps per run"),
    ("--eval-freq", "eval_freq", positive_integer, "env steps between evaluations"),
    ("--eval-episodes", "eval_episodes", positive_integer, "evaluation episodes (one per seed from --eval-seed on)"),
    (
        "--eval-seed",
        "eval_seed",
        natural_number,
        "seed of the first evaluation episode (held out from training seeds)",
    ),
    ("--alpha", "alpha", float, "priority exponent of the per and rank variants"),
    ("--beta-start", "beta_start", float, "PER importance-sampling exponent at the start"),
    ("--beta-end", "beta_end", float, "PER importance-sampling exponent at the end of the run"),
    ("--epsilon", "epsilon", float, "PER priority offset"),
    ("--lap-alpha", "lap_alpha", float, "exponent of the lap, pal and la3p variants"),
    ("--lap-min-priority", "lap_min_priority", float, "LAP's priority floor and Huber threshold (lap, pal, la3p)"),
    ("--la3p-fraction", "la3p_fraction", float, "LA3P's prioritized share of each batch, in (0, 1]"),
    ("--half-life", "half_life", float, "half-life of the faded variant's priorities, in env steps"),
    ("--reward-floor", "reward_floor", float, "|reward| floor of the per_reward_floor ablation's priorities"),
    ("--relo-alpha", "relo_alpha", float, "priority exponent of the relo variant"),
    ("--relo-epsilon", "relo_epsilon", float, "priority offset of the relo variant"),
    (
        "--regressor-learning-rate",
        "regressor_learning_rate",
        float,
        "learning rate of the TD-error regressor (expected_td, expected_relo variants)",
    ),
    ("--learning-rate", "learning_rate", float, "Adam learning rate"),
    ("--learning-starts", "learning_starts", natural_number, "env steps collected before training"),
    ("--batch-size", "batch_size", positive_integer, "minibatch size"),
    ("--buffer-size", "buffer_size", positive_integer, "replay capacity"),
    ("--gamma", "gamma", float, "discount factor"),
    ("--ent-coef", "ent_coef", str, "SAC entropy coefficient, e.g. auto, auto_0.1 or 0.01"),
)
# Where a walk-forward comparison goes by default: results/walk_forward/<price file's stem>/<preset>.
_WALK_FORWARD_DIR = Path("results/walk_forward")
# The walk-forward functions' parameters, as the command line calls them.
_WALK_FORWARD_FLAGS = {
    "test_from": "--test-from",
    "test_fraction": "--test-fraction",
    "price_columns": "--price-columns",
}


def _defaults() -> RunConfig:
    from comparison.experiment import RunConfig

    return RunConfig()


def json_object(text: str) -> dict[str, Any]:
    """Parse a JSON object given on the command line."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"not valid JSON ({error}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object such as '{{\"cost_bps\": 2.0}}', got {text!r}")
    return value


def _net_arch_default(defaults_from_preset: bool) -> str:
    """The ``--net-arch`` default as help text: ``64 64``, or each preset's."""
    from comparison.runner import PRESETS

    defaults = _defaults()
    if not defaults_from_preset:
        return " ".join(map(str, defaults.net_arch))
    sizes = {name: preset.overrides.get("net_arch", defaults.net_arch) for name, preset in PRESETS.items()}
    return ", ".join(f"{' '.join(map(str, arch))} for {name}" for name, arch in sizes.items())


def _add_run_options(parser: argparse.ArgumentParser, defaults_from_preset: bool, described: bool = True) -> None:
    """
    The options of ``_RUN_OPTIONS`` and the run settings that take several values.

    :param defaults_from_preset: the help gives the preset's as the defaults (compare.py), else RunConfig's
    :param described: with help (False: none, and nothing imported)
    """
    group = parser.add_argument_group("run settings")
    defaults = _defaults() if described else None
    for flag, name, kind, text in _RUN_OPTIONS:
        default = "the preset's" if defaults_from_preset else getattr(defaults, name)
        group.add_argument(
            flag, dest=name, type=kind, default=None, help=f"{text} (default: {default})" if described else None
        )
    group.add_argument(
        "--env-kwargs", dest="env_kwargs", type=json_object, default=None, help="env keyword arguments as JSON"
    )
    group.add_argument(
        "--net-arch",
        dest="net_arch",
        type=int,
        nargs="+",
        default=None,
        help=f"hidden layer sizes (default: {_net_arch_default(defaults_from_preset)})" if described else None,
    )
    group.add_argument(
        "--regime-weights",
        dest="regime_weights",
        type=float,
        nargs="+",
        default=None,
        metavar="W",
        help="sampling weight of the normal, stress and break regimes in the regime_weighted ablation (default: "
        + " ".join(map(str, getattr(defaults, "regime_weights", ())))
        + ")"
        if described
        else None,
    )


def _given_run_options(args: argparse.Namespace) -> dict[str, Any]:
    names = [name for _, name, _, _ in _RUN_OPTIONS] + ["env_kwargs", "net_arch", "regime_weights"]
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


def _config(parser: argparse.ArgumentParser, **fields: Any) -> RunConfig:
    """
    The run's config, with the SHA-256 of the price file it replays if any, or a usage error naming what is wrong
    (env kwargs included, tried on the envs).
    """
    import gymnasium as gym

    from comparison.experiment import RunConfig, prices_sha256

    try:
        config = RunConfig(**fields)
        for env_kwargs in (config.env_kwargs, config.evaluation_env_kwargs):
            gym.make(config.env_id, **env_kwargs).close()
        sha256 = prices_sha256(config.env_kwargs, config.evaluation_env_kwargs)
    except Exception as error:  # the env's own errors for bad kwargs are ValueError, TypeError, ...
        parser.error(f"{type(error).__name__}: {error}")
    return dataclasses.replace(config, prices_sha256=sha256)


def train_parser() -> argparse.ArgumentParser:
    """Parser of ``scripts/train.py``."""
    from comparison.experiment import VARIANTS

    parser = argparse.ArgumentParser(
        prog="train.py",
        description="Train sb3_per.SAC once (one replay variant: " + ", ".join(VARIANTS) + ") with periodic "
        "evaluation on held-out episodes; writes config.json, progress.csv, TensorBoard logs, telemetry.csv, "
        "evaluations.csv and model.zip.",
    )
    parser.add_argument(
        "--replay", choices=sorted(VARIANTS), default="per", help="replay variant (see compare.py --help)"
    )
    parser.add_argument("--seed", type=int, default=0, help="training seed")
    parser.add_argument("--out", type=Path, default=Path("runs"), help="output directory (a run folder inside)")
    parser.add_argument("--no-progress-bar", action="store_true", help="hide SB3's progress bar")
    _add_run_options(parser, defaults_from_preset=False)
    return parser


def train_main(argv: Sequence[str] | None = None) -> Path:
    """Entry point of ``scripts/train.py``; returns the run's directory."""
    from comparison.experiment import RunConfig, train_run
    from comparison.processes import configure_torch_threads

    parser = train_parser()
    args = parser.parse_args(argv)
    config = _config(parser, variant=args.replay, seed=args.seed, **_given_run_options(args))
    configure_torch_threads(1)
    directory = args.out / config.run_name
    try:  # a folder of another run's is refused before anything is trained (train_run would raise)
        holds_config(config, directory, same_run=RunConfig.canonical)
    except ValueError as error:
        parser.error(str(error))
    formats = ("stdout", "csv", "tensorboard")
    rows = train_run(config, directory, progress_bar=not args.no_progress_bar, log_formats=formats, save_model=True)
    final = rows.iloc[-1]
    print(f"{config.run_name}: final mean return {final['mean_return']:+.4f}, Sharpe {final['sharpe']:+.2f}")
    print(f"written to {directory}")
    return directory


def _add_walk_forward_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "walk-forward on real prices",
        "train on the earlier rows of a price CSV and evaluate (agent and baselines) on the later ones only: no "
        "episode window, warm-up included, straddles the split",
    )
    group.add_argument("--prices", type=Path, default=None, metavar="FILE.csv", help="the price history to replay")
    group.add_argument(
        "--price-columns",
        nargs=2,
        default=None,
        metavar=("A", "B"),
        help="the CSV's price columns of legs A and B (default: the env's, price_a price_b)",
    )
    split = group.add_mutually_exclusive_group()
    split.add_argument(
        "--test-from",
        default=None,
        metavar="YYYY-MM-DD",
        help="evaluate on the rows dated from this day on (needs a date column)",
    )
    split.add_argument(
        "--test-fraction", type=float, default=None, metavar="F", help="evaluate on the last share F of the rows"
    )


def _walk_forward_fields(
    parser: argparse.ArgumentParser, args: argparse.Namespace, env_kwargs: dict[str, Any]
) -> dict[str, Any]:
    """
    ``RunConfig``'s ``env_kwargs`` (training rows) and ``eval_env_kwargs`` (test rows) of ``--prices``, none without
    it; a usage error for a split that cannot be made.
    """
    from envs import walk_forward_env_kwargs

    if args.prices is None:
        given = [
            flag
            for flag, value in (
                ("--price-columns", args.price_columns),
                ("--test-from", args.test_from),
                ("--test-fraction", args.test_fraction),
            )
            if value is not None
        ]
        if given:
            parser.error(
                f"{' and '.join(given)} only {'applies' if len(given) == 1 else 'apply'} with --prices FILE.csv"
            )
        return {}
    if args.test_from is None and args.test_fraction is None:
        parser.error("--prices needs --test-from YYYY-MM-DD or --test-fraction F: where its test rows begin")
    if env_kwargs.get("prices_csv") is not None or env_kwargs.get("prices") is not None:
        parser.error("give the prices once: --prices, or prices_csv in --env-kwargs, not both")
    prices: dict[str, Any] = {"prices_csv": str(args.prices)}
    if args.price_columns is not None:
        prices["price_columns"] = list(args.price_columns)
    try:
        train, test = walk_forward_env_kwargs(
            {**env_kwargs, **prices}, test_from=args.test_from, test_fraction=args.test_fraction
        )
    except (ValueError, OSError) as error:  # a bad split or env argument; a CSV that cannot be read
        parser.error(f"--prices {args.prices}: {_with_flags(str(error))}")
    return dict(env_kwargs=train, eval_env_kwargs=test)


def _with_flags(message: str) -> str:
    """``message`` with the walk-forward functions' parameter names (``test_fraction``, ...) as their flags."""
    return re.sub(r"\b(" + "|".join(_WALK_FORWARD_FLAGS) + r")\b", lambda name: _WALK_FORWARD_FLAGS[name[1]], message)


def compare_parser(described: bool = True) -> argparse.ArgumentParser:
    """
    Parser of ``scripts/compare.py``.

    :param described: with its help, and the choices of ``--variants`` and ``--backend``, which import the
        experiment (seconds). False: the options and their types only, no help (``-h`` is let through), and nothing
        imported: to refuse a mistyped command at once
    """
    if described:
        from comparison.experiment import VARIANTS
        from comparison.runner import BACKENDS, PRESETS

        description = (
            "Compare SAC replay variants (uniform, PER, rank-based PER, LAP, PAL, LA3P, faded PER) over seeds on the "
            "pairs-trading env, next to the z-score and flat baselines; writes evaluations.csv, telemetry.csv (where "
            "each replay's attention goes, per regime), baselines.csv, summary.md and PNG plots, and per run "
            "runs/<variant>_s<seed>/ with config.json, progress.csv, telemetry.csv and evaluations.csv (no model, no "
            "TensorBoard events: see train.py). Resumable: finished runs in --out are not rerun. "
            f"Presets (over the defaults {dataclasses.asdict(_defaults())}): "
            + "; ".join(f"{name}: {preset.describe()}" for name, preset in PRESETS.items())
        )
        out_help = (
            "output directory (default: "
            + ", ".join(f"{p.out_dir} for {name}" for name, p in PRESETS.items())
            + f"; the full preset's is committed, so that any clone resumes it; with --prices, {_WALK_FORWARD_DIR}/"
            "<the price file's name>/<preset>)"
        )
    parser = argparse.ArgumentParser(
        prog="compare.py", description=description if described else None, add_help=described
    )
    if not described:
        parser.add_argument("-h", "--help", action="store_true")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_const", dest="preset", const="quick", help="smoke run (< 1 min)")
    size.add_argument("--full", action="store_const", dest="preset", const="full", help="the real answer (hours)")
    parser.set_defaults(preset="default")
    parser.add_argument(
        "--seeds",
        type=natural_number,
        nargs="+",
        default=None,
        help="training seeds of every variant (default: the preset's, e.g. 0..19, and 0..9 for rank and pal, with "
        "--full)",
    )
    parser.add_argument(
        "--variants",
        nargs="+",
        choices=list(VARIANTS) if described else VARIANT_NAMES,
        default=None,
        help="replay variants (default: the preset's: uniform per, and with --full also lap la3p faded rank pal relo "
        "expected_td expected_relo_root): uniform (SB3), per (proportional PER), rank (rank-based PER), lap "
        "(loss-adjusted prioritization), pal (uniform replay with the prioritized approximation loss), la3p (actor "
        "prioritized replay: LAP for the critic, 1/priority for the actor), faded (PER whose priorities halve every "
        "--half-life env steps), relo (reducible-loss priorities), expected_td (priorities from a learned expected TD "
        "error), expected_relo_root (ReLo's priority at the expected target, its square root: ExpectedReLo), tqc "
        "(sb3-contrib's TQC, uniform replay), tqc_uper (TQC with UPER's information-gain priorities); an ablation "
        "of ReLo, in no preset: relo_online_loss (ReLo whose priority is the online critics' loss alone, without the "
        "target critics'); five ablations of PER, in no preset: per_no_is (PER's sampling, no importance weights), "
        "regime_weighted (no TD priorities: each regime sampled in proportion to --regime-weights, uniformly within "
        "it), per_critic_only (PER for the critic's batch, a uniform batch for the actor), per_reward_priority "
        "(PER's sampling and weights with priorities from |reward|, set at write: no TD errors) and "
        "per_reward_floor (per_reward_priority with every |reward| below --reward-floor counted as it)",
    )
    parser.add_argument(
        "--backend",
        choices=BACKENDS if described else None,
        default="local",
        help="where the runs train: local = worker processes on this machine (--workers of them); ray = one "
        "Ray task per run (one CPU, one torch thread) on a Ray cluster, the run's files sent back into --out. "
        "Same numbers either way (default: local)",
    )
    parser.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDRESS",
        help="with --backend ray: the Ray cluster to join, e.g. auto (the cluster this machine belongs to, "
        "started with `ray start`), HOST:6379 or ray://HOST:10001 (Ray Client). Default: the RAY_ADDRESS "
        "environment variable, else a Ray started on this machine, else a new local Ray on this machine's cores",
    )
    parser.add_argument(
        "--workers",
        type=positive_integer,
        default=None,
        help="parallel runs of the local backend (default: one per core); with --backend ray, Ray runs as many "
        "at once as the cluster has free CPUs",
    )
    parser.add_argument("--out", type=Path, default=None, help=out_help if described else None)
    parser.add_argument("--no-progress-bar", action="store_true", help="hide the progress bar")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="train nothing: write the CSVs and report from the runs of the plan already finished in --out (say, "
        "part-way through --full)",
    )
    _add_run_options(parser, defaults_from_preset=True, described=described)
    _add_walk_forward_options(parser)
    return parser


def _out_dir_problem(out: Path) -> str | None:
    """What keeps ``out`` from being (or becoming) a folder: it is a file, or lies under one; None if nothing does."""
    if out.exists():
        return None if out.is_dir() else "is a file, not a folder"
    above = next((parent for parent in out.parents if parent.exists()), None)
    return None if above is None or above.is_dir() else f"lies under {above}, which is a file, not a folder"


def _finished_runs(parser: argparse.ArgumentParser, configs: Sequence[RunConfig], out: Path) -> list[RunConfig]:
    """
    The runs of ``configs`` already finished in ``out`` (``--report-only``), saying why each run begun but not
    finished is left out; a usage error if there are none.
    """
    from comparison.runner import NOT_STARTED, unfinished_reason

    try:
        reasons = {config.run_name: unfinished_reason(out, config) for config in configs}
    except ValueError as error:  # a run directory written with other settings, or whose settings cannot be read
        parser.error(str(error))
    for name, reason in reasons.items():
        if reason not in (None, NOT_STARTED):
            print(f"left out of the report: {name}: {reason}", file=sys.stderr)
    finished = [config for config in configs if reasons[config.run_name] is None]
    if not finished:
        parser.error(f"--report-only: none of the plan's {len(configs)} runs has finished in {out}")
    return finished


def _check_no_value_twice(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """A usage error where ``--seeds`` or ``--variants`` lists a value twice."""
    for flag, values in (("--seeds", args.seeds), ("--variants", args.variants)):
        if values is not None and len(set(values)) != len(values):
            parser.error(f"{flag} lists a value twice: {values}")


def _check_every_replay_option_used(parser: argparse.ArgumentParser, args: argparse.Namespace, plan: Any) -> None:
    """A usage error where a replay setting is given (``--half-life``, ...) that no variant of the plan uses."""
    from comparison.experiment import REPLAY_FIELDS, VARIANTS

    used = set().union(*(VARIANTS[variant].fields for variant in plan))
    for flag, name, _, _ in _RUN_OPTIONS:
        if name in REPLAY_FIELDS and getattr(args, name) is not None and name not in used:
            parser.error(f"{flag} is used by none of the plan's variants ({', '.join(plan)}): it would be ignored")


def compare_main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Entry point of ``scripts/compare.py``; returns what ``run_comparison`` returns."""
    # A mistyped command fails here, before the imports below
    light_parser = compare_parser(described=False)
    _check_no_value_twice(light_parser, light_parser.parse_args(argv))
    from comparison.processes import RunsInterrupted, exit_status_interrupted, stop_on_signals
    from comparison.runner import PRESETS, is_finished, plan_runs, run_comparison

    parser = compare_parser()
    args = parser.parse_args(argv)
    preset = PRESETS[args.preset]
    fields = {**preset.overrides, **_given_run_options(args)}
    fields.update(_walk_forward_fields(parser, args, fields.get("env_kwargs", {})))
    base = _config(parser, **fields)
    if args.backend != "ray":
        if args.ray_address is not None:
            parser.error("--ray-address is only used with --backend ray")
    else:
        if args.workers is not None:
            parser.error("--workers applies to --backend local; Ray runs as many runs as the cluster has free CPUs")
        if importlib.util.find_spec("ray") is None:
            parser.error('--backend ray needs Ray: pip install -e ".[ray]" from the clone')
    if args.out is not None:
        out = args.out
    else:
        out = preset.out_dir if args.prices is None else _WALK_FORWARD_DIR / args.prices.stem / args.preset
    problem = _out_dir_problem(out)
    if problem is not None:
        parser.error(f"--out {out} {problem}")
    plan = preset.plan(args.variants, args.seeds)
    _check_every_replay_option_used(parser, args, plan)
    for variant in plan:  # a setting that only some variants use is checked by theirs (the faded half-life)
        try:
            dataclasses.replace(base, variant=variant)
        except ValueError as error:
            parser.error(f"variant {variant}: {error}")
    try:  # each variant's config passed its checks: what can still be wrong is a seed (negative, an evaluation one)
        configs = plan_runs(base, plan)
    except ValueError as error:
        parser.error(f"--seeds: {error}")
    command = shlex.join(["python", "scripts/compare.py", *(sys.argv[1:] if argv is None else argv)])
    if args.report_only:
        configs = _finished_runs(parser, configs, out)
    try:
        with stop_on_signals():
            result = run_comparison(
                configs,
                out,
                workers=args.workers,
                command=command,
                progress=not args.no_progress_bar,
                backend=args.backend,
                ray_address=args.ray_address,
            )
    except (ValueError, ConnectionError) as error:  # e.g. --out holds other settings' runs, no Ray at the address
        parser.error(str(error))
    except RunsInterrupted as stop:
        status = exit_status_interrupted(stop)
        finished = sum(is_finished(out, config) for config in configs)
        print(f"{finished} of {len(configs)} runs finished and kept; rerun the same command to resume", file=sys.stderr)
        raise SystemExit(status) from None
    print("\n".join(_closing_lines(out, result)))
    for name, message in result["failures"].items():
        print(f"run {name} FAILED: {message.strip().splitlines()[-1]}")
    if result["failures"]:
        raise SystemExit(f"{len(result['failures'])} run(s) failed; the report covers the others")
    return result


def _closing_lines(out: Path, result: dict[str, Any]) -> list[str]:
    """What a finished comparison prints: the headline of its report and where its files are."""
    from comparison.summary import headline
    from comparison.tables import load_baselines, load_evaluations

    figures = ", ".join(path.name for key, path in result.items() if key not in ("failures", "summary"))
    return [
        *headline(load_evaluations(result["evaluations"]), load_baselines(result["baselines"])),
        f"Report: {result['summary']} (intervals, differences, definitions); beside it {figures}; each run's "
        f"files in {out / RUNS_DIR}",
    ]
