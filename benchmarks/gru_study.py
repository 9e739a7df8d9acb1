"""The GRU's studies: variants x seeds of chapter 6's PPO run from chapter 4's checkpoint, each study a config file.

    python benchmarks/gru_study.py benchmarks/studies/NAME.toml [--seeds 0 1] [--variants A B] [--updates N]
                                   [--out runs/NAME] [--jobs 2]

The study's file comes first, or after options that take one value (--seeds and --variants take several).

A study's file (benchmarks/studies/*.toml, its comments say what it asks) gives its name (the record is
notebooks/data/NAME.json), the run's length (updates, episodes per update, greedy evaluation every so many
updates), the seeds, and its variants: each a table of `course_lib.gru.trainer.PPOConfig` settings laid over
the study's base (below). Options on the command line override the file's and become part of the record's
command.

Base: chapter 6's PPO from notebooks/checkpoints/gru_pretrained.pt, self-imitation and behaviour cloning as
PPOConfig's defaults give them, exploration off unless a variant sets it, groups of 8 episodes, one torch
thread a run, and the same number of gradient steps per update in every variant (2 minibatches x 2 epochs,
teacher episodes included).

Each run is `course_lib.gru.ppo_run.run` into OUT/<variant>/seed<N> (config.json, metrics.jsonl, eval.json);
a finished run made by this code on this machine, with this torch and the same settings, is reused, any other made again
(`_common.reuse_or_clear`), and the record names the commit every run was made at. Writes OUT/summary.json and the
record (--notebook-data): mean and spread (sample standard deviation) over the seeds of every greedy pass
rate (train, val and test; near and far), each run's metrics per update and greedy result per task. Runs
are seeded and independent, so --jobs changes the time, not the results; run seconds include the sharing
of the cores between the runs at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from _common import (command_args, gru_record_rates, made_by, new_record, provenance, read_study_file,
                     record_path, reuse_or_clear, stats, write_json)  # benchmarks/_common.py (this folder is on sys.path when run as a script)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# greedy pass@1 of each group, as the record names it (`_common.gru_record_rates`)
KEYS = ("train_pass_rate", "val_pass_rate", "val_near_pass_rate", "val_far_pass_rate",
        "test_pass_rate", "test_near_pass_rate", "test_far_pass_rate")
KEEP = ("update", "reward_mean", "train_pass_rate_sampled", "val_pass_rate_sampled", "approx_kl", "clip_frac",
        "entropy", "explained_variance", "ratio_mean", "ratio_std", "bc_loss", "bc_weight", "sil_loss",
        "teacher_episodes", "val_tasks_found", "length_mean", "explore_pass_rate", "train_pass_rate_greedy",
        "val_pass_rate_greedy", "wall_s")


def base_config(args) -> dict:
    return dict(pretrained=str(args.pretrained), updates=args.updates, episodes_per_update=args.episodes,
                group_size=8, minibatch_size=args.episodes // 2, eval_every=args.eval_every,
                save_every=args.updates, plots=False, threads=1,
                explore_episodes=0)  # chapter 6's exploration: off unless a variant sets it


def settings_of(variant: str, seed: int, args, variants: dict) -> dict:
    """A run's PPOConfig settings: the variant's over base_config, with the study's minibatch rule."""
    settings = {**base_config(args), **variants[variant], "seed": seed}
    # the same number of gradient steps per update in every variant: 2 minibatches x 2 epochs
    settings["minibatch_size"] = (args.episodes + settings.get("teacher_episodes", 0)) // 2
    return settings


def run_one(variant: str, seed: int, args, variants: dict) -> dict:
    """One run of `variants[variant]` (settings over base_config) into args.out/variant/seedN; reused if done."""
    from course_lib.gru.ppo_run import run
    from course_lib.gru.trainer import PPOConfig
    from course_lib.runs import file_sha256

    run_dir = args.out / variant / f"seed{seed}"
    settings = settings_of(variant, seed, args, variants)
    if reuse_or_clear(run_dir, {**settings, "pretrained_sha256": file_sha256(args.pretrained)}):
        print(f"{variant} seed {seed}: reusing {run_dir}, made by this code here with these settings", flush=True)
        return json.loads((run_dir / "eval.json").read_text())
    config = PPOConfig(**settings)
    start = time.perf_counter()
    result = run(config, run_dir, progress=False, log=lambda *a: None)
    seconds = time.perf_counter() - start
    result["run_seconds"] = round(seconds, 1)
    result["load_average"] = round(os.getloadavg()[0], 2)
    (run_dir / "eval.json").write_text(json.dumps(result, indent=1) + "\n")
    print(f"{variant} seed {seed}: {seconds:.0f} s, " +
          ", ".join(f"{k} {result[k]:.3f}" for k in ("train_greedy_pass@1", "val_greedy_pass@1", "test_greedy_pass@1")),
          flush=True)
    return result


def record(args, variants: dict, results: dict, summary: dict, arguments: list[str], code: dict) -> dict:
    """The record (benchmarks/schema.py's format): the header, one row per run, and under the names the
    chapters and Results pages read, the summary, each run's metrics per update and greedy result per task."""
    from course_lib.gru.ppo_run import read_metrics

    first = results[args.variants[0]][args.seeds[0]]
    made = provenance(args.pretrained)
    config = {k: v for k, v in base_config(args).items() if k != "pretrained"}
    total_seconds = round(sum(results[v][s].get("run_seconds", 0.0) for v in args.variants for s in args.seeds), 1)
    data = new_record("benchmarks/gru_study.py", config={"seeds": args.seeds, "variants": variants, **config},
                      machine=made["machine"], device="cpu", seconds=total_seconds, args=arguments,
                      threads=config["threads"],  # each run's (args.jobs runs at a time)
                      code=code)  # the commit the runs were made at
    data |= {
        "runs": [{"variant": v, "seed": s, **gru_record_rates(results[v][s]),
                  "run_seconds": results[v][s].get("run_seconds")}
                 for v in args.variants for s in args.seeds],
        # the names the chapters and the Results pages read
        "seeds": args.seeds, "variants": variants, "base_config": config,
        "pretrained": "notebooks/checkpoints/gru_pretrained.pt", "pretrained_sha256": made["pretrained_sha256"],
        "summary": summary,
        "metrics": {v: {str(s): [{k: m.get(k) for k in KEEP if k in m}
                                 for m in read_metrics(args.out / v / f"seed{s}")] for s in args.seeds}
                    for v in args.variants},
        "per_task": {v: {str(s): {row["id"]: row["greedy_passed"] for row in results[v][s]["per_task"]}
                         for s in args.seeds}
                     for v in args.variants},
        "pretrained_per_task": {row["id"]: row["greedy_passed"] for row in first["baseline"]["per_task"]},
        "tasks": {row["id"]: {"split": row["split"], "novelty": row["novelty"]} for row in first["per_task"]},
        "total_seconds": total_seconds,
    }
    return data


def read_study(path: Path) -> dict:
    """A study's file: name (the file's own), updates, episodes, eval_every, seeds and variants (a table of
    PPOConfig settings each), checked so that a mistake is named before any run starts."""
    need = {"name": str, "updates": int, "episodes": int, "eval_every": int, "seeds": list, "variants": dict}
    study, problems = read_study_file(path, need, "benchmarks/studies/")
    if isinstance(study.get("variants"), dict) and (
            not study["variants"] or not all(isinstance(v, dict) for v in study["variants"].values())):
        problems.append("variants must be [variants.NAME] tables of PPOConfig settings")
    if problems:
        raise SystemExit(f"{path}: " + "; ".join(problems))
    return study


def check_settings(args, variants: dict) -> None:
    """Build every run's PPOConfig before any run starts: a wrong name, type or value is named with its variant."""
    from course_lib.gru.trainer import PPOConfig

    for variant in args.variants:
        for seed in args.seeds:
            try:
                PPOConfig(**settings_of(variant, seed, args, variants))
            except (TypeError, ValueError) as e:
                raise SystemExit(f"{args.study}: variant {variant!r}, seed {seed}: {e} (python -m course_lib ppo "
                                 "--help lists PPOConfig's settings)")


def parse(argv=None) -> tuple[argparse.Namespace, dict]:
    """The command line and the study it names, the study's values filling every option not given."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("study", type=Path, help="the study's file, benchmarks/studies/NAME.toml")
    parser.add_argument("--seeds", type=int, nargs="+", help="[the study's]")
    parser.add_argument("--variants", nargs="+", help="some of the study's variants [all]")
    parser.add_argument("--out", type=Path, help="[runs/NAME]")
    parser.add_argument("--pretrained", type=Path, default=ROOT / "notebooks" / "checkpoints" / "gru_pretrained.pt")
    parser.add_argument("--updates", type=int, help="PPO updates per run [the study's]")
    parser.add_argument("--episodes", type=int, help="sampled episodes per update [the study's]")
    parser.add_argument("--eval-every", type=int,
                        help="greedy evaluation every this many updates (0: at the end only) [the study's]")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time (each uses one torch thread)")
    parser.add_argument("--notebook-data", type=Path, help="the record [notebooks/data/NAME.json]")
    args = parser.parse_args(argv)
    study = read_study(args.study)
    variants, name = study["variants"], study["name"]
    for key in ("seeds", "updates", "episodes", "eval_every"):
        if getattr(args, key) is None:
            setattr(args, key, study[key])
    args.variants = args.variants or list(variants)
    for key in ("seeds", "variants"):
        if len(set(getattr(args, key))) != len(getattr(args, key)):
            parser.error(f"--{key} lists a value twice: {getattr(args, key)}")
    unknown = sorted(set(args.variants) - set(variants))
    if unknown:
        parser.error(f"{args.study} has no variant {', '.join(unknown)}; it has {', '.join(variants)}")
    args.out = args.out or ROOT / "runs" / name
    args.notebook_data = args.notebook_data or record_path(name)
    return args, study


def main(argv=None) -> int:
    """Run every variant x seed of a study (two at a time), summarise, write OUT/summary.json and the record."""
    args, study = parse(argv)
    variants = study["variants"]
    check_settings(args, variants)
    jobs = [(v, s) for v in args.variants for s in args.seeds]
    if args.jobs > 1:  # runs are independent and seeded: the same results in any order, on any number of cores
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            done = dict(zip(jobs, pool.map(run_one, *zip(*jobs), [args] * len(jobs), [variants] * len(jobs))))
    else:
        done = {job: run_one(*job, args, variants) for job in jobs}
    results = {v: {s: done[(v, s)] for s in args.seeds} for v in args.variants}
    first = results[args.variants[0]][args.seeds[0]]
    summary = {"pretrained": {k: gru_record_rates(first["baseline"]).get(k) for k in KEYS}}
    for v in args.variants:
        summary[v] = {k: stats([gru_record_rates(results[v][s]).get(k) for s in args.seeds]) for k in KEYS}
        summary[v]["run_seconds"] = stats([results[v][s].get("run_seconds") for s in args.seeds])
    print(f"\n{'variant':10s} " + " ".join(f"{k.replace('_pass_rate', ''):>13s}" for k in KEYS))
    for v in args.variants:
        print(f"{v:10s} " + " ".join(f"{summary[v][k]['mean']:6.3f}±{summary[v][k]['std']:.3f}" for k in KEYS))
    print(f"{'pretrained':10s} " + " ".join(f"{summary['pretrained'][k]:13.3f}" for k in KEYS))

    data = record(args, {v: variants[v] for v in args.variants}, results, summary, command_args(argv),
                  made_by({f"{v}/seed{s}": args.out / v / f"seed{s}" for v in args.variants for s in args.seeds}))
    write_json(args.out / "summary.json", {"summary": summary})
    write_json(args.notebook_data, data)
    print(f"wrote {args.out / 'summary.json'} and {args.notebook_data}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
