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


def _provenance(record: dict, path: str, script: str | None = None) -> str:
    """The record's device, machine, date and the command that remakes it; `script` where the record
    does not name its own (records made before benchmarks/schema.py's format)."""
    command = record.get("command") or f"python {record.get('script') or script or '?'}"
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


# Chapter 6: the GRU trained by PPO, on a CPU. Every pass rate below is a greedy pass@1 (one
# greedy program per task); the splits' roles are in each header (ROLES).

def _pm(values: list[float]) -> str:
    """mean ± standard error of per-seed values."""
    from course_lib.stats import mean_se
    mean, se = mean_se(values)
    return f"{mean:.3f} ± {se:.3f}"


def _paired(values: list[float], baseline: list[float]) -> list:
    """[change ± SE, t-interval half-width, each seed's difference, verdict] of values - baseline, paired by seed."""
    from course_lib.stats import mean_se, seed_verdict, t_factor
    d = [a - b for a, b in zip(values, baseline)]
    mean, se = mean_se(d)
    return [f"{mean:+.3f} ± {se:.3f}", f"{t_factor(len(d)) * se:.3f}",
            " ".join(f"{x:+.3f}" for x in d), seed_verdict(d)]


def _code(text: str) -> str:
    return "`" + text.strip().replace("|", "\\|") + "`"


_SPLIT_KEYS = ("train_pass_rate", "val_pass_rate", "test_pass_rate")
_SPLIT_HEADER = [f"{ROLES[k.split('_')[0]]}: greedy pass@1" for k in _SPLIT_KEYS]


def _variants_table(record: dict, labels: dict, extra: tuple = ()) -> str:
    """One row per variant of a GRU study record: mean ± SE over its seeds of each split's greedy pass@1,
    then the pretrained start (one model: no ±). `extra`: (header, function of the variant key) columns."""
    n = len(record["seeds"])
    rows = [[label, n] + [_pm(record["summary"][v][k]["values"]) for k in _SPLIT_KEYS] + [f(v) for _, f in extra]
            for v, label in labels.items()]
    rows.append(["pretrained start (chapter 4's checkpoint)", 1]
                + [f"{record['summary']['pretrained'][k]:.3f}" for k in _SPLIT_KEYS] + ["" for _ in extra])
    return _table(["variant", "seeds"] + [f"{h} (mean ± SE)" for h in _SPLIT_HEADER] + [h for h, _ in extra], rows)


def _paired_table(record: dict, pairs: list[tuple[str, str, str]], splits=_SPLIT_KEYS[:2]) -> str:
    """Per-seed differences of greedy pass@1, paired by seed: (label, variant, baseline variant) each."""
    from course_lib.stats import t_factor
    n = len(record["seeds"])
    summary = record["summary"]
    rows = [[label, ROLES[k.split("_")[0]]] + _paired(summary[v][k]["values"], summary[b][k]["values"])
            for label, v, b in pairs for k in splits]
    return _table(["difference of greedy pass@1, paired by seed", "split", f"change ± SE ({n} seeds)",
                   f"t-interval (± {t_factor(n):.2f} SE)", "per seed", "verdict"], rows)


def copying_start_section() -> str:
    path = "notebooks/data/ppo_from_copying_start.json"
    record = _read(path)
    if record is None:
        return ""
    runs = record["runs"]
    splits = ("train", "val", "test")
    per_seed = [[name, f"`{run['checkpoint']}`", run["updates"], f"{run['wall_seconds']:.0f}"]
                + [f"{run['start'][s]:.3f} → {run['end'][s]:.3f}" for s in splits] for name, run in runs.items()]
    n = len(runs)
    summary = [[ROLES[s], "greedy pass@1", _pm([r["start"][s] for r in runs.values()]),
                _pm([r["end"][s] for r in runs.values()])] + _paired([r["end"][s] for r in runs.values()],
                                                                     [r["start"][s] for r in runs.values()])
               for s in splits]
    gained = [[name, task, _code(programs["start"]), _code(programs["end"])]
              for name, run in runs.items() for task, programs in run["gained"].items()]
    return "\n\n".join([
        "## PPO from a start that copies",
        "Chapter 6's `python -m course_lib ppo` with its default settings (20 updates of 128 episodes, with "
        "exploration), run on the CPU from each of chapter 4's models that copy the blanks of a docstring "
        "(pretrained on a GPU by `benchmarks/variants_pretraining.py`; chapter 4). The start is the only change from "
        "the chapter's runs. Each seed's start is its own checkpoint, and each change is paired with it.",
        _table(["seed", "start checkpoint", "updates", "wall s"]
               + [f"{ROLES[s]}: greedy pass@1, start → end" for s in splits], per_seed),
        f"Over the {n} seeds (mean ± standard error; with {n} seeds the t-interval is wide, so this is a hint, "
        "not a measured spread):",
        _table(["split", "measure", f"start (mean ± SE, {n} seeds)", f"end (mean ± SE, {n} seeds)", "change ± SE",
                "t-interval", "per seed", "verdict"], summary),
        "The val tasks (rewarded: RL saw their tests) each seed's policy passes at the end and not at the start, "
        "with the greedy program before and after:",
        _table(["seed", "task", "start writes", "end writes"], gained),
        _provenance(record, path, "benchmarks/ppo_from_copying_start.py")])


def ppo_benchmark_section() -> str:
    path = "notebooks/data/ppo_benchmark.json"
    b = _read(path)
    if b is None:
        return ""
    s = b["summary"]
    n = len(b["seeds"])
    keys = ("train_pass_rate", "val_pass_rate", "val_near_pass_rate", "val_far_pass_rate", "test_pass_rate")
    header = ["train: greedy pass@1", f"{ROLES['val']}: greedy pass@1", "val, near tasks: greedy pass@1",
              "val, far tasks: greedy pass@1", f"{ROLES['test']}: greedy pass@1"]
    methods = {"pretrained": "pretrained start (each seed's own)", "ppo": "PPO (with exploration)",
               "expert_iteration": "expert iteration"}
    rows = [[label, n] + [_pm(s[f"{m}.{k}"]["values"]) for k in keys] for m, label in methods.items()]
    bon = s["best_of_n.val_solved"]["values"]
    ppo = s["ppo.val_pass_rate"]["values"]
    paired = [["PPO − expert iteration", "greedy pass@1 − greedy pass@1"]
              + _paired(ppo, s["expert_iteration.val_pass_rate"]["values"]),
              ["PPO − best-of-N", "greedy pass@1 − fraction solved by some sample"] + _paired(ppo, bon)]
    per_update = b["config"]["episodes_per_update"]
    cost = [[r["seed"], r["ppo_update_seconds"],
             f"{len(b['metrics'][str(r['seed'])])} × {per_update} sampled + "
             f"{sum(m['explore_episodes'] for m in b['metrics'][str(r['seed'])]):,} exploring",
             f"{r['expert_iteration']['rounds']} rounds × {per_update}", f"{r['best_of_n']['samples']:,}",
             r["command_seconds"], r["pretrain_seconds"]] for r in b["runs"]]
    return "\n\n".join([
        "## PPO against sampling and filtering, at equal time",
        f"For each of {n} seeds (`{b['seeds']}`), the whole `python -m course_lib ppo` command (it pretrains its own "
        "start, then runs 20 PPO updates with exploration), then two baselines from the same start, on the same tasks "
        "(train and val, never test), at the same temperature, for the wall time the PPO updates took: "
        "**expert iteration** (sample, keep what passes, fine-tune on it with the training solutions mixed in, "
        "repeat; then answer greedily) and **best-of-N** (sample until the time is up; a task counts as solved if "
        "any sample passes, so it needs the tests when answering and leaves the model unchanged). `near` and `far` "
        "split a split's tasks into small variations of a training task and tasks that need an idea no training "
        "task shows.",
        _table(["method", "seeds"] + [f"{h} (mean ± SE)" for h in header], rows),
        _table(["method", "seeds", f"{ROLES['val']}: fraction of tasks some sample passed (mean ± SE)"],
               [["best-of-N (tests run at answer time)", n, _pm(bon)]]),
        "PPO against each baseline on val (rewarded: RL saw its tests), paired by seed:",
        _table(["difference", "measures", f"change ± SE ({n} seeds)", "t-interval", "per seed", "verdict"], paired),
        "What each method spent, per seed (seconds of wall time):",
        _table(["seed", "PPO updates, s", "PPO episodes", "expert iteration", "best-of-N samples",
                "whole ppo command, s", "of which pretraining, s"], cost),
        _provenance(b, path, "benchmarks/ppo_benchmark.py")])


def explore_section() -> str:
    path = "notebooks/data/explore_ablation.json"
    record = _read(path)
    if record is None:
        return ""
    labels = {"ppo": "PPO, no exploration", "explore": "PPO + exploration", "no_ppo": "exploration, PPO off"}
    seconds = ("s per run (mean)", lambda v: f"{record['summary'][v]['run_seconds']['mean']:.0f}")
    return "\n\n".join([
        "## What exploration adds, and what PPO adds",
        "Three variants from chapter 4's checkpoint, 20 updates each, two runs at a time on the 2 cores: PPO without "
        "and with the epsilon-greedy episodes (512 per update, ε = 0.03, on the val tasks no program has passed yet), "
        "and the run with exploration once more with the PPO objective switched off (`ppo_coef=0`: the same "
        "sampling and exploring episodes, behaviour cloning and self-imitation alone). The last two differ only in the "
        "PPO term, so their difference is PPO's own share.",
        _variants_table(record, labels, (seconds,)),
        _paired_table(record, [("PPO + exploration − PPO, no exploration", "explore", "ppo"),
                               ("PPO + exploration − exploration, PPO off (PPO's own share)", "explore", "no_ppo")]),
        _provenance(record, path)])


def lambda_section() -> str:
    path = "notebooks/data/lambda_ablation.json"
    record = _read(path)
    if record is None:
        return ""
    from course_lib.stats import mean_se
    labels = {"lam095": "λ = 0.95 (default)", "lam0": "λ = 0", "lam1": "λ = 1", "no_critic": "no critic"}
    def last_ev(v: str) -> str:
        values = [record["metrics"][v][str(s)][-1]["explained_variance"] for s in record["seeds"]]
        return f"{mean_se(values)[0]:+.2f}"
    ev = ("critic's explained variance at the last update (mean over seeds)", last_ev)
    return "\n\n".join([
        "## λ and the critic, on the task",
        "PPO with exploration (the `PPO + exploration` settings above) from chapter 4's checkpoint, 20 updates, "
        "changing one thing at a time: λ = 0 (each token's advantage is its one-step TD error), λ = 1 (the return "
        "minus V(s_t): the critic as a baseline only), and no critic (V = 0: each token's advantage is its episode's "
        "return, normalised over the batch). The critic starts untrained. Explained variance measures how well the "
        "critic matches its own target, the λ-return, which differs with λ: it is not a ranking of critics.",
        _variants_table(record, labels, (ev,)),
        _paired_table(record, [(f"{labels[v]} − λ = 0.95", v, "lam095") for v in ("lam0", "lam1", "no_critic")]),
        _provenance(record, path)])


def gru_methods_section() -> str:
    path = "notebooks/data/gru_methods.json"
    record = _read(path)
    if record is None:
        return ""
    labels = {"ppo": "PPO", "grpo": "GRPO", "reinforce": "REINFORCE"}
    seconds = ("s per run (mean)", lambda v: f"{record['summary'][v]['run_seconds']['mean']:.0f}")
    return "\n\n".join([
        "## The same run, another method",
        "Chapter 6's PPO without exploration (20 updates of 128 episodes, behaviour cloning and self-imitation on) "
        "from chapter 4's checkpoint, changing only `method`: PPO (the critic, GAE, two epochs of the clipped loss), "
        "GRPO (no critic; an episode's advantage is its reward minus its task group's mean, over the group's standard "
        "deviation) and REINFORCE (no critic, no clip, no entropy bonus; the reward minus the batch's mean, one pass "
        "over the batch, so half the gradient steps and half the behaviour-cloning steps of the others). Its PPO runs "
        "have the settings of `PPO, no exploration` above. Seconds per run depend on what else ran on the machine at "
        "the time; they are not comparable across records.",
        _variants_table(record, labels, (seconds,)),
        _paired_table(record, [(f"{labels[v]} − PPO", v, "ppo") for v in ("grpo", "reinforce")]),
        _provenance(record, path)])


PAGES = {
    "06_ppo_and_gae": ("Chapter 6 results: PPO and GAE",
                       "The records behind [chapter 6](../../notebooks/06_ppo_and_gae.ipynb): the GRU trained by "
                       "PPO on a CPU. Every pass rate is a greedy pass@1 (one greedy program per task), "
                       "and every ± is a standard error over random seeds.",
                       (copying_start_section, ppo_benchmark_section, explore_section, lambda_section,
                        gru_methods_section)),
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
