"""The book's Results part: one page per chapter with records, written from the record files.

A chapter keeps the one table that carries its lesson; the experiment records behind it (seed
tables, speed measurements, GPU runs) are shown here, each with the device, seeds, date and the
command that remakes it. Every table on these pages is computed from a record file in
notebooks/data/ or benchmarks/records/, never typed in:

    python -m book_tools.results            rewrite book/results/*.md from the records
    python -m book_tools.results --check    exit 1 if a page differs from what the records give (a test runs it)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from book_tools import REPO_ROOT

RESULTS_DIR = REPO_ROOT / "book" / "results"
ROLES = {"train": "train", "val": "val (rewarded: RL saw its tests)", "test": "test (never trained on)"}


def _read(path: str) -> dict | None:
    file = REPO_ROOT / path
    return json.loads(file.read_text()) if file.exists() else None


def _table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _provenance(record: dict, path: str) -> str:
    command = record.get("command") or f"python {record.get('script', '?')}"
    return (f"*Record:* `{path}`. *Device:* {record.get('device', 'cpu')}; *machine:* "
            f"{record.get('machine', 'not recorded')}. "
            f"*Date:* {record.get('date', 'not recorded')}. *Remake:* `{command}`.")


def engine_section() -> str:
    path = "benchmarks/records/generation_throughput.json"
    record = _read(path)
    if record is None:
        return ""
    engines = [e for e in ("hf", "fast", "fast-bf16") if e in record["runs"][0]["settings"]["rollout"]]
    rows = []
    for run in record["runs"]:
        for setting, label in (("rollout", "chapter 10's rollout: 4 prompts x 4 samples"),
                               ("batch-32", "32 prompts, batch 32")):
            r = run["settings"][setting]
            rows.append([run["capability"], label] + [r[e]["tokens_per_s"] for e in engines]
                        + [f"{r[e]['tokens_per_s'] / r['hf']['tokens_per_s']:.2f}x" for e in engines[1:]])
    steps = []
    for run in record["runs"]:
        for engine in engines:
            s = run["grpo_step"][engine]
            kl = s["row"].get("sampler_kl")
            kl = ("none: the learner samples" if kl is None else f"{kl:.1e}" if abs(kl) >= 1e-6 else "below 1e-6")
            steps.append([run["capability"], engine, s["step_s"], s["generate_s"], s["sandbox_s"], s["score_s"],
                          s["learn_s"], kl])
    samplers = [k for k in ("fast", "fast-bf16", "int8") if k in record["runs"][0]["int8_candidate"]]
    kl = [[run["capability"]] + [f"{run['int8_candidate'][k]['kl_mean']:.1e} / {run['int8_candidate'][k]['kl_max']:.1e}"
                                 for k in samplers] for run in record["runs"]]
    return "\n\n".join([
        "## The rollout engine: useful tokens per second",
        "SmolLM2-135M-Instruct, sampling at temperature 0.8 up to 128 new tokens; useful tokens are those up to "
        "each row's `<eos>`. `hf` is Hugging Face's `generate`, `fast` the course's engine (`course_lib.lm.decode`) "
        "in float32, `fast-bf16` the same with bfloat16 weights. Each CPU capability ran in its own process, on "
        "the same machine, in one run. `ATEN_CPU_CAPABILITY=avx2` changes torch's own kernels only: the bfloat16 "
        "matrix products go to oneDNN, which still uses the processor's AVX512-BF16 instructions, so no row "
        "here shows bfloat16 on a processor without them (where it is much slower).",
        _table(["CPU capability", "setting"] + [f"{e} tokens/s" for e in engines]
               + [f"{e} / hf" for e in engines[1:]], rows),
        "One GRPO step of chapter 10's settings (4 x 4, 2 epochs, KL 0.05) from the start, in seconds, by part, "
        "and the step's logged KL(sampler || learner) per token (estimated on the sampled tokens, so it can come out "
        "slightly negative):",
        _table(["CPU capability", "engine", "step", "generate", "sandbox", "score (log pi_old)", "learn",
                "sampler KL"], steps),
        "KL per token between each sampler's next-token distribution and the learner's, on the same prefixes "
        "(mean / max). int8 weights with one scale per activation matrix (fbgemm) were a candidate; this KL "
        "rules them out:",
        _table(["CPU capability"] + samplers, kl),
        _provenance(record, path)])


def _paired_rows(record: dict, label: str) -> list[list]:
    """Rows of one record of start + trained seeds: each measure's start, trained mean ± SE, paired change, verdict."""
    from course_lib.stats import mean_se, seed_verdict, t_factor

    start = next(r for r in record["runs"] if r["model"] == "start")
    trained = sorted((r for r in record["runs"] if r["model"] != "start"), key=lambda r: r["seed"])
    n = record["sampled"]["n_samples"]
    measures = (("train", "greedy pass@1", "train_greedy_pass@1"),
                ("val (rewarded)", "greedy pass@1", "val_greedy_pass@1"),
                ("test (never trained on)", "greedy pass@1", "test_greedy_pass@1"),
                ("test (never trained on)", f"pass@1 from {n} samples at T = {record['sampled']['temperature']}",
                 "test_pass_rate"))
    rows = []
    for split, measure, key in measures:
        values = [r[key] for r in trained]
        changes = [v - start[key] for v in values]
        mean, se = mean_se(values)
        change, change_se = mean_se(changes)
        rows.append([label, f"{len(trained)}", split, measure, f"{start[key]:.3f}", f"{mean:.3f} ± {se:.3f}",
                     f"{change:+.3f} ± {change_se:.3f}", f"{t_factor(len(trained)) * change_se:.3f}",
                     seed_verdict(changes)])
    return rows


def cpu_methods_section() -> str:
    records = [("GRPO", "notebooks/data/smollm2_rl.json"), ("REINFORCE", "notebooks/data/smollm2_reinforce.json"),
               ("PPO (value head, GAE)", "notebooks/data/smollm2_ppo.json"),
               ("GRPO in TRL's GRPOTrainer", "notebooks/data/trl_grpo.json")]
    loaded = [(label, path, _read(path)) for label, path in records]
    loaded = [(label, path, record) for label, path, record in loaded if record is not None]
    if not loaded:
        return ""
    rows = [row for label, _, record in loaded for row in _paired_rows(record, label)]
    settings = "; ".join(f"{label}: {r['rl']['steps']} steps of {r['rl']['prompts_per_step']} prompts x "
                         f"{r['rl']['group_size']}" for label, _, r in loaded)
    return "\n\n".join([
        "## Three methods on the CPU, made with Hugging Face's `generate` sampling",
        "SmolLM2-135M-Instruct with a fresh LoRA, through its chat template, the course's train and val tasks as "
        f"the rollout pool ({settings}). Each trained seed is paired with the one start (its greedy answers "
        "have no sampling noise); the course's splits: train (trained on), val (rewarded: RL saw its tests), "
        "test (never trained on).",
        _table(["method", "seeds", "split", "measure", "start", "trained", "change", "t-interval", "verdict"], rows),
        "\n".join("- " + _provenance(record, path) for _, path, record in loaded)])


def cpu_seeds_section() -> str:
    path = "notebooks/data/smollm2_cpu_seeds.json"
    record = _read(path)
    if record is None or not record.get("summary"):
        return ""
    rl = record["config"]["rl"]
    rows = [[name.split(", ")[0], name.split(", ")[1].replace("_", " ").replace("pass@1 from samples",
                                                                                 "pass@1 from 10 samples at T = 0.8"),
             f"{r['start']:.3f}", f"{r['trained_mean']:.3f} ± {r['trained_se']:.3f}",
             f"{r['change']:+.3f} ± {r['change_se']:.3f}",
             f"{r['t_interval']:.3f}" if r["t_interval"] is not None else "one seed", r["verdict"]]
            for name, r in record["summary"].items()]
    seeds = sorted(r["seed"] for r in record["runs"])
    step_s = sum(r["train_seconds"] for r in record["runs"]) / len(record["runs"]) / rl["steps"]
    return "\n\n".join([
        "## The CPU recipe with the fast engine, over seeds",
        f"GRPO on SmolLM2-135M-Instruct, {rl['steps']} steps of {rl['prompts_per_step']} prompts x "
        f"{rl['group_size']} samples (the course's train and val tasks as the rollout pool), seeds {seeds}, "
        f"{step_s:.0f} s a step on average. "
        "Measured on the 48 tasks never trained on: the course's `test` split (15) and HumanEval's test "
        "problems (33). The start is measured once (its greedy answers have no sampling noise; its samples "
        "use the same sampling seed as every trained model's, so their own noise is not in the ±); each change "
        "is paired with it; mean ± standard error over the seeds; a gain is real only beyond the t-interval. "
        "Rollouts and samples come from the fast engine; the per-step KL(sampler || learner) is in the record.",
        _table(["tasks (all never trained on)", "measure", "start", "trained", "change", "t-interval", "verdict"],
               rows),
        _provenance(record, path)])


def gpu_seeds_section() -> str:
    path = "notebooks/data/smollm2_gpu_seeds.json"
    record = _read(path)
    if record is None:
        return ""
    names = {"train_greedy": ("train", "greedy pass@1"), "val_greedy": ("val (rewarded)", "greedy pass@1"),
             "test_greedy": ("test (never trained on)", "greedy pass@1"),
             "test_sampled": ("test (never trained on)", "pass@1 from 10 samples at T = 0.8"),
             "humaneval_test_greedy": ("HumanEval test (never trained on)", "greedy pass@1"),
             "humaneval_test_sampled": ("HumanEval test (never trained on)", "pass@1 from 10 samples at T = 0.8"),
             "never_trained_greedy": ("all 48 never trained on", "greedy pass@1"),
             "never_trained_sampled": ("all 48 never trained on", "pass@1 from 10 samples at T = 0.8")}
    rows = []
    for key, (tasks, measure) in names.items():
        c = record["changes"][key]
        n = len(c["change"])
        mean_start = sum(c["start"]) / n
        mean_trained = sum(c["trained"]) / n
        rows.append([tasks, measure, f"{mean_start:.3f}", f"{mean_trained:.3f}",
                     f"{c['change_mean']:+.3f} ± {c['change_se']:.3f}", round(c["t_factor"] * c["change_se"], 3),
                     c["verdict"]])
    rl = record["rl"]
    return "\n\n".join([
        "## The long GRPO run on a GPU, three seeds",
        f"The same loop with {rl['prompts_per_step']} prompts x {rl['group_size']} samples a step and "
        f"{record['train_seconds_budget']:.0f} s of training per seed (the course's train and val tasks and "
        f"HumanEval's 131 training problems as the rollout pool), seeds {record['seeds']}, side by side on one GPU. "
        "Changes are paired by seed with each seed's own measurement of the start.",
        _table(["tasks", "measure", "start", "trained", "change", "t-interval", "verdict"], rows),
        _provenance(record, path)])


PAGES = {
    "10_lora_rl": ("Chapter 10 results: LoRA-RL on a real model",
                   "The records behind [chapter 10](../../notebooks/10_lora_rl.ipynb).",
                   (engine_section, cpu_seeds_section, cpu_methods_section, gpu_seeds_section)),
}


def render(name: str) -> str:
    title, intro, sections = PAGES[name]
    parts = [f"# {title}", intro + " Every table below is computed by `python -m book_tools.results` from the "
             "record file it names."]
    parts += [s for s in (section() for section in sections) if s]
    return "\n\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m book_tools.results", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that every page is up to date")
    args = parser.parse_args(argv)
    stale = []
    for name in PAGES:
        path = RESULTS_DIR / f"{name}.md"
        text = render(name)
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path.relative_to(REPO_ROOT)))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path.relative_to(REPO_ROOT)}")
    if stale:
        print("stale results page(s): " + ", ".join(stale) + "; run python -m book_tools.results", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
