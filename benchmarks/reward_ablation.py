"""Reward variants compared on the same seeds: short PPO runs from the same pretrained start (chapter 7).

    python benchmarks/reward_ablation.py [--seeds 0 1 2] [--updates 8] [--out runs/reward_ablation]

Every variant is the same PPO run (`course_lib.gru.trainer`, chapter 6's settings except the ones
below) with a different `reward` spec (`course_lib.rewards`). All runs start from chapter 4's
checkpoint (notebooks/checkpoints/gru_pretrained.pt), so no pretraining is repeated, and use one
torch thread. After the updates the policy is evaluated greedily on every split (test included:
it is never rolled out). Prints, per variant, the mean and spread (sample standard deviation over
the seeds) of the final pass rates; writes OUT/<variant>/seed<N>/{config.json,metrics.jsonl,eval.json}
and a compact copy for the chapter's notebook (--notebook-data). A finished run made by this code with the same
settings is reused (`_common.reuse_or_clear`); any other is made again.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from _common import gru_record_rates, gru_record_row, new_record, provenance, reuse_or_clear, stats, write_json  # benchmarks/_common.py (this folder is on sys.path when run as a script)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VARIANTS = {  # name -> reward spec
    "pass": "pass=1",
    "fraction": "fraction=1",
    "naive syntax": "fraction=1,naive_syntax=1",
    "fixed syntax": "fraction=1,syntax=1",
    "shaped": "pass=1,fraction=0.5,syntax=0.1,length=0.002,quality=0.1",
}
# chapter 6's settings, made short (8 tasks x 8 episodes per update, one minibatch per epoch, greedy evaluation only
# at the end), and without the teacher terms (chapter 8) or exploration: here the reward alone moves the policy
SETTINGS = dict(episodes_per_update=64, minibatch_size=64, eval_every=0, save_every=1000, threads=1,
                bc_coef=0.0, sil_coef=0.0, explore_episodes=0)
# greedy pass@1 of each group, as the record names it (`_common.gru_record_rates`)
RATES = ("train_pass_rate", "val_pass_rate", "val_near_pass_rate", "val_far_pass_rate",
         "test_pass_rate", "test_near_pass_rate", "test_far_pass_rate")
CURVE_KEYS = ("update", "wall_s", "reward_mean", "pass_rate_sampled", "train_pass_rate_sampled",
              "val_pass_rate_sampled", "train_pass_rate_greedy", "val_pass_rate_greedy", "length_mean",
              "truncated_frac", "entropy", "approx_kl", "term_pass", "term_fraction", "term_syntax",
              "term_naive_syntax", "term_length", "term_quality")


def slug(name: str) -> str:
    return name.replace(" ", "_")


def run_one(variant: str, spec: str, seed: int, updates: int, out: Path, pretrained: Path) -> dict:
    from course_lib.gru.pretrain import evaluate_policy
    from course_lib.gru.trainer import EVAL_FILE, PPOConfig, PPOTrainer

    run_dir = out / slug(variant) / f"seed{seed}"
    from course_lib.runs import file_sha256

    settings = dict(seed=seed, pretrained=str(pretrained), updates=updates, reward=spec, **SETTINGS)
    # a finished run made by this code with these settings is reused; any other is made again
    if reuse_or_clear(run_dir, {**settings, "pretrained_sha256": file_sha256(pretrained)}):
        print(f"{variant:14s} seed {seed}: reusing {run_dir}", flush=True)
        return json.loads((run_dir / EVAL_FILE).read_text())
    config = PPOConfig(**settings)
    start = time.perf_counter()
    trainer = PPOTrainer(config, run_dir, progress=False)
    trainer.train()
    result = evaluate_policy(trainer.model, trainer.tokenizer, trainer.tasks, allowed_ids=trainer.alphabet,
                             max_new_tokens=config.max_new_tokens, timeout=config.sandbox_timeout)
    result.update(variant=variant, reward=spec, seed=seed, seconds=round(time.perf_counter() - start, 1))
    (run_dir / EVAL_FILE).write_text(json.dumps(result, indent=1) + "\n")
    rates = gru_record_rates(result)
    print(f"{variant:14s} seed {seed}: " + ", ".join(f"{k} {rates[k]:.3f}" for k in RATES[:5:2])
          + f" in {result['seconds']:.0f} s", flush=True)
    return result


def record(args, results: dict, summary: dict, seconds: float) -> dict:
    """The record (benchmarks/schema.py's format): the header, one row per run, and under the names chapter 7
    and its Results page read, the summary, each run's metrics per update and greedy result per task."""
    from course_lib.gru.ppo_run import read_metrics

    made = provenance(args.pretrained)
    config = {"variants": {v: VARIANTS[v] for v in args.variants}, "seeds": args.seeds, "updates": args.updates,
              **SETTINGS}
    data = new_record("benchmarks/reward_ablation.py", config=config, machine=made["machine"], device="cpu",
                      seconds=seconds, threads=SETTINGS["threads"])
    return data | {
        "runs": [{"variant": v, "seed": r["seed"], **gru_record_rates(r), "seconds": r["seconds"]}
                 for v, rows in results.items() for r in rows],
        "variants": config["variants"], "seeds": args.seeds, "updates": args.updates,
        "settings": SETTINGS, "pretrained": str(args.pretrained.relative_to(ROOT)),
        "pretrained_sha256": made["pretrained_sha256"], "summary": summary,
        "metrics": {v: {str(s): [{k: m.get(k) for k in CURVE_KEYS}
                                 for m in read_metrics(args.out / slug(v) / f"seed{s}")] for s in args.seeds}
                    for v in args.variants},
        "per_task": {v: {str(r["seed"]): [{k: gru_record_row(row)[k] for k in ("id", "split", "passed", "fraction",
                                                                                "completion")}
                                          for row in r["per_task"]] for r in rows} for v, rows in results.items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--updates", type=int, default=6, help="PPO updates per run")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--pretrained", type=Path, default=ROOT / "notebooks" / "checkpoints" / "gru_pretrained.pt")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "reward_ablation")
    parser.add_argument("--notebook-data", type=Path, default=ROOT / "notebooks" / "data" / "reward_ablation.json")
    args = parser.parse_args()
    if not args.pretrained.exists():
        print(f"error: {args.pretrained} does not exist; run chapter 4's notebook first to create it")
        return 2
    import torch

    from course_lib.gru.checkpoints import load_checkpoint
    from course_lib.gru.env import action_alphabet
    from course_lib.tasks import load_tasks
    from course_lib.gru.pretrain import evaluate_policy

    torch.set_num_threads(1)
    started = time.perf_counter()
    results = {v: [run_one(v, VARIANTS[v], s, args.updates, args.out, args.pretrained) for s in args.seeds]
               for v in args.variants}
    model, tok, _ = load_checkpoint(args.pretrained)
    tasks = load_tasks()
    start_eval = evaluate_policy(model, tok, tasks, allowed_ids=action_alphabet(tasks, tok))
    summary = {v: {k: stats([gru_record_rates(r).get(k) for r in rows]) for k in RATES} for v, rows in results.items()}
    summary["pretrained"] = {k: stats([gru_record_rates(start_eval)[k]]) for k in RATES}

    print(f"\n{'variant':14s}" + "".join(f"{k.replace('_pass_rate', ''):>16s}" for k in RATES))
    for v, row in summary.items():
        print(f"{v:14s}" + "".join(f"{row[k]['mean']:>9.3f} ±{row[k]['std']:.3f}" for k in RATES))
    seconds = time.perf_counter() - started
    print(f"\n{len(args.variants)} variants x {len(args.seeds)} seeds in {seconds:.0f} s "
          f"(load average {os.getloadavg()[0]:.2f})")

    data = record(args, results, summary, seconds)
    write_json(args.notebook_data, data)
    print(f"wrote {args.notebook_data}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
