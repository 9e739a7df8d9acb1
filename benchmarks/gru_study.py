"""The GRU's studies: variants x seeds of chapter 6's PPO run from chapter 4's checkpoint, each study a config file.

    python benchmarks/gru_study.py benchmarks/studies/NAME.toml [--seeds 0 1] [--variants A B] [--updates N]
                                   [--out runs/NAME] [--jobs 2]

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
a run whose eval.json exists is reused (delete its folder to redo it). Writes OUT/summary.json and the
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

from _common import gru_record_rates, new_record, provenance, stats, write_json  # benchmarks/_common.py (this folder is on sys.path when run as a script)

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


def run_one(variant: str, seed: int, args, variants: dict) -> dict:
    """One run of `variants[variant]` (settings over base_config) into args.out/variant/seedN; reused if done."""
    from course_lib.gru.trainer import PPOConfig
    from course_lib.gru.ppo_run import run

    run_dir = args.out / variant / f"seed{seed}"
    if (run_dir / "eval.json").exists():
        print(f"{variant} seed {seed}: reusing {run_dir}", flush=True)
        return json.loads((run_dir / "eval.json").read_text())
    if run_dir.exists():  # an interrupted run: start it again
        for f in run_dir.iterdir():
            f.unlink() if f.is_file() else None
    settings = {**base_config(args), **variants[variant], "seed": seed}
    # the same number of gradient steps per update in every variant: 2 minibatches x 2 epochs
    settings["minibatch_size"] = (args.episodes + settings.get("teacher_episodes", 0)) // 2
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


def record(args, variants: dict, results: dict, summary: dict, command_args: list[str]) -> dict:
    """The record (benchmarks/schema.py's format): the header, one row per run, and under the names the
    chapters and Results pages read, the summary, each run's metrics per update and greedy result per task."""
    from course_lib.gru.ppo_run import read_metrics

    first = results[args.variants[0]][args.seeds[0]]
    made = provenance(args.pretrained)
    config = {k: v for k, v in base_config(args).items() if k != "pretrained"}
    total_seconds = round(sum(results[v][s].get("run_seconds", 0.0) for v in args.variants for s in args.seeds), 1)
    data = new_record("benchmarks/gru_study.py", config={"seeds": args.seeds, "variants": variants, **config},
                      machine=made["machine"], device="cpu", seconds=total_seconds, args=command_args,
                      threads=config["threads"])  # each run's (args.jobs runs at a time)
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
    """A study's file: name, updates, episodes, eval_every, seeds and variants (a table of PPOConfig settings
    each), checked so that a mistake is named before any run starts."""
    import tomllib

    from course_lib.gru.trainer import PPOConfig

    try:
        study = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise SystemExit(f"{path}: cannot read the study ({e}); see benchmarks/studies/ for examples")
    need = {"name": str, "updates": int, "episodes": int, "eval_every": int, "seeds": list, "variants": dict}
    wrong = [f"{k} (expected {t.__name__})" for k, t in need.items() if not isinstance(study.get(k), t)]
    extra = sorted(set(study) - set(need))
    if wrong or extra or not study.get("variants"):
        raise SystemExit(f"{path}: " + "; ".join(
            ([f"missing or wrong: {', '.join(wrong)}"] if wrong else [])
            + ([f"unknown keys: {', '.join(extra)}"] if extra else [])
            + ([] if study.get("variants") else ["no [variants.NAME] table"])))
    fields = set(PPOConfig.__dataclass_fields__)
    for variant, settings in study["variants"].items():
        unknown = sorted(set(settings) - fields)
        if unknown:
            raise SystemExit(f"{path}: variant {variant!r} sets {', '.join(unknown)}, which PPOConfig does not have "
                             f"(python -m course_lib ppo --help lists its settings)")
    return study


def main(argv=None) -> int:
    """Run every variant x seed of a study (two at a time), summarise, write OUT/summary.json and the record."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("study", type=Path, nargs="?")
    known, _ = pre.parse_known_args(argv)
    study = read_study(known.study) if known.study else None
    name = study["name"] if study else "NAME"
    variants = study["variants"] if study else {}
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("study", type=Path, help="the study's file, benchmarks/studies/NAME.toml")
    parser.add_argument("--seeds", type=int, nargs="+", default=study and study["seeds"])
    parser.add_argument("--variants", nargs="+", default=list(variants), choices=list(variants) or None)
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / name)
    parser.add_argument("--pretrained", type=Path, default=ROOT / "notebooks" / "checkpoints" / "gru_pretrained.pt")
    parser.add_argument("--updates", type=int, default=study and study["updates"], help="PPO updates per run")
    parser.add_argument("--episodes", type=int, default=study and study["episodes"],
                        help="sampled episodes per update")
    parser.add_argument("--eval-every", type=int, default=study and study["eval_every"],
                        help="greedy evaluation every this many updates (0: at the end only)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time (each uses one torch thread)")
    parser.add_argument("--notebook-data", type=Path, default=ROOT / "notebooks" / "data" / f"{name}.json")
    args = parser.parse_args(argv)
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

    data = record(args, {v: variants[v] for v in args.variants}, results, summary, _command_args(argv))
    write_json(args.out / "summary.json", {"summary": summary})
    write_json(args.notebook_data, data)
    print(f"wrote {args.out / 'summary.json'} and {args.notebook_data}")
    return 0


def _command_args(argv) -> list[str]:
    """This run's arguments as the record's command gives them: paths inside the repository relative to it."""
    out = []
    for a in (sys.argv[1:] if argv is None else argv):
        p = Path(a)
        if p.exists() and p.resolve().is_relative_to(ROOT):
            a = p.resolve().relative_to(ROOT).as_posix()
        out.append(a)
    return out


if __name__ == "__main__":
    sys.exit(main())
