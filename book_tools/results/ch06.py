"""Chapter 6's Results page: PPO and GAE on the GRU, its benchmark and its ablations."""

from __future__ import annotations

from book_tools.results.common import (ROLES, code_block, md_table, mean_pm, paired_change, read_record,
    record_provenance)


_SPLIT_KEYS = ("train_pass_rate", "val_pass_rate", "test_pass_rate")


_SPLIT_HEADER = [f"{ROLES[k.split('_')[0]]}: greedy pass@1" for k in _SPLIT_KEYS]


def _variants_table(record: dict, labels: dict, extra: tuple = ()) -> str:
    """One row per variant of a GRU study record: mean ± SE over its seeds of each split's greedy pass@1,
    then the pretrained start (one model: no ±). `extra`: (header, function of the variant key) columns."""
    n = len(record["seeds"])
    rows = [[label, n] + [mean_pm(record["summary"][v][k]["values"]) for k in _SPLIT_KEYS] + [f(v) for _, f in extra]
            for v, label in labels.items()]
    rows.append(["pretrained start (chapter 4's checkpoint)", 1]
                + [f"{record['summary']['pretrained'][k]:.3f}" for k in _SPLIT_KEYS] + ["" for _ in extra])
    return md_table(["variant", "seeds"] + [f"{h} (mean ± SE)" for h in _SPLIT_HEADER] + [h for h, _ in extra], rows)


def _run_seconds(record: dict) -> tuple:
    """A `_variants_table` column: each variant's mean seconds per run."""
    return ("s per run (mean)", lambda v: f"{record['summary'][v]['run_seconds']['mean']:.0f}")


def _paired_table(record: dict, pairs: list[tuple[str, str, str]], splits=_SPLIT_KEYS[:2]) -> str:
    """Per-seed differences of greedy pass@1, paired by seed: (label, variant, baseline variant) each."""
    from course_lib.stats import t_factor
    n = len(record["seeds"])
    summary = record["summary"]
    rows = [[label, ROLES[k.split("_")[0]]] + paired_change(summary[v][k]["values"], summary[b][k]["values"])
            for label, v, b in pairs for k in splits]
    return md_table(["difference of greedy pass@1, paired by seed", "split", f"change ± SE ({n} seeds)",
                   f"t-interval (± {t_factor(n):.2f} SE)", "per seed", "verdict"], rows)


def copying_start_section() -> str:
    path = "notebooks/data/ppo_from_copying_start.json"
    record = read_record(path)
    if record is None:
        return ""
    runs = {f"seed{run['seed']}": run for run in record["runs"]}
    splits = ("train", "val", "test")
    per_seed = [[name, f"`{run['checkpoint']}`", run["updates"], f"{run['wall_seconds']:.0f}"]
                + [f"{run['start'][s]:.3f} → {run['end'][s]:.3f}" for s in splits] for name, run in runs.items()]
    n = len(runs)
    summary = [[ROLES[s], "greedy pass@1", mean_pm([r["start"][s] for r in runs.values()]),
                mean_pm([r["end"][s] for r in runs.values()])] + paired_change([r["end"][s] for r in runs.values()],
                                                                     [r["start"][s] for r in runs.values()])
               for s in splits]
    gained = [[name, task, code_block(programs["start"]), code_block(programs["end"])]
              for name, run in runs.items() for task, programs in run["gained"].items()]
    return "\n\n".join([
        "## PPO from a start that copies",
        "Chapter 6's `python -m course_lib ppo` with its default settings (20 updates of 128 episodes, with "
        "exploration), run on the CPU from each of chapter 4's models that copy the blanks of a docstring "
        "(pretrained on a GPU by `benchmarks/variants_pretraining.py`; [chapter 4's results](04_gru_pretraining.md)). "
        "The start is the only change from "
        "the chapter's runs. Each seed's start is its own checkpoint, and each change is paired with it.",
        md_table(["seed", "start checkpoint", "updates", "wall s"]
               + [f"{ROLES[s]}: greedy pass@1, start → end" for s in splits], per_seed),
        f"Over the {n} seeds (mean ± standard error; with {n} seeds the t-interval is wide, so this is a hint, "
        "not a measured spread):",
        md_table(["split", "measure", f"start (mean ± SE, {n} seeds)", f"end (mean ± SE, {n} seeds)", "change ± SE",
                "t-interval", "per seed", "verdict"], summary),
        "The val tasks (rewarded: RL saw their tests) each seed's policy passes at the end and not at the start, "
        "with the greedy program before and after:",
        md_table(["seed", "task", "start writes", "end writes"], gained),
        record_provenance(record, path)])


def ppo_benchmark_section() -> str:
    path = "notebooks/data/ppo_benchmark.json"
    b = read_record(path)
    if b is None:
        return ""
    s = b["summary"]
    n = len(b["seeds"])
    keys = ("train_pass_rate", "val_pass_rate", "val_near_pass_rate", "val_far_pass_rate", "test_pass_rate")
    header = ["train: greedy pass@1", f"{ROLES['val']}: greedy pass@1", "val, near tasks: greedy pass@1",
              "val, far tasks: greedy pass@1", f"{ROLES['test']}: greedy pass@1"]
    methods = {"pretrained": "pretrained start (each seed's own)", "ppo": "PPO (with exploration)",
               "expert_iteration": "expert iteration"}
    rows = [[label, n] + [mean_pm(s[f"{m}.{k}"]["values"]) for k in keys] for m, label in methods.items()]
    bon = s["best_of_n.val_solved"]["values"]
    ppo = s["ppo.val_pass_rate"]["values"]
    paired = [["PPO − expert iteration", "greedy pass@1 − greedy pass@1"]
              + paired_change(ppo, s["expert_iteration.val_pass_rate"]["values"]),
              ["PPO − best-of-N", "greedy pass@1 − tasks some sample passed"] + paired_change(ppo, bon)]
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
        md_table(["method", "seeds"] + [f"{h} (mean ± SE)" for h in header], rows),
        md_table(["method", "seeds", f"{ROLES['val']}: tasks some sample passed (mean ± SE)"],
               [["best-of-N (tests run at answer time)", n, mean_pm(bon)]]),
        "PPO against each baseline on val (rewarded: RL saw its tests), paired by seed:",
        md_table(["difference", "measures", f"change ± SE ({n} seeds)", "t-interval", "per seed", "verdict"], paired),
        "What each method spent, per seed:",
        md_table(["seed", "PPO updates, s", "PPO episodes", "expert iteration", "best-of-N samples",
                "whole ppo command, s", "of which pretraining, s"], cost),
        record_provenance(b, path)])


def _ablation_section(path: str, title: str, intro: str, labels: dict, columns, pairs) -> str:
    """A Results-page section for one ablation record: its variants' table (with `columns`), the paired
    differences `pairs` ((label, variant, against), ...) and its provenance; "" when the record is absent.
    `columns` and `pairs` may be functions of the record."""
    record = read_record(path)
    if record is None:
        return ""
    columns = columns(record) if callable(columns) else columns
    pairs = pairs(record) if callable(pairs) else pairs
    return "\n\n".join([title, intro, _variants_table(record, labels, columns), _paired_table(record, pairs),
                         record_provenance(record, path)])


def explore_section() -> str:
    labels = {"ppo": "PPO, no exploration", "explore": "PPO + exploration", "no_ppo": "exploration, PPO off"}
    return _ablation_section(
        "notebooks/data/explore_ablation.json", "## What exploration adds, and what PPO adds",
        "Three variants from chapter 4's checkpoint, 20 updates each, two runs at a time on the 2 cores: PPO without "
        "and with the epsilon-greedy episodes (512 per update, ε = 0.03, on the val tasks no program has passed yet), "
        "and the run with exploration once more with the PPO objective switched off (`ppo_coef=0`: the same "
        "sampling and exploring episodes, behaviour cloning and self-imitation alone). The last two differ only in the "
        "PPO term, so their difference is PPO's own share.",
        labels, lambda record: (_run_seconds(record),),
        [("PPO + exploration − PPO, no exploration", "explore", "ppo"),
         ("PPO + exploration − exploration, PPO off (PPO's own share)", "explore", "no_ppo")])


def lambda_section() -> str:
    from course_lib.stats import mean_se
    labels = {"lam095": "λ = 0.95 (default)", "lam0": "λ = 0", "lam1": "λ = 1", "no_critic": "no critic"}

    def explained_variance(record):
        def last_ev(v: str) -> str:
            values = [record["metrics"][v][str(s)][-1]["explained_variance"] for s in record["seeds"]]
            return f"{mean_se(values)[0]:+.2f}"
        return (("critic's explained variance at the last update (mean over seeds)", last_ev),)

    return _ablation_section(
        "notebooks/data/lambda_ablation.json", "## λ and the critic, on the task",
        "PPO with exploration (the `PPO + exploration` settings above) from chapter 4's checkpoint, 20 updates, "
        "changing one thing at a time: λ = 0 (each token's advantage is its one-step TD error), λ = 1 (the return "
        "minus V(s_t): the critic as a baseline only), and no critic (V = 0, λ still 0.95: a token's advantage is its "
        "episode's return times 0.95^k, k tokens before the end, normalised over the batch). The critic starts "
        "untrained. Explained variance measures how well the critic matches its own target, the λ-return, which "
        "differs with λ: it is not a ranking of critics.",
        labels, explained_variance,
        [(f"{labels[v]} − λ = 0.95", v, "lam095") for v in ("lam0", "lam1", "no_critic")])


def gru_methods_section() -> str:
    labels = {"ppo": "PPO", "grpo": "GRPO", "reinforce": "REINFORCE"}
    return _ablation_section(
        "notebooks/data/gru_methods.json", "## The same run, another method",
        "Chapter 6's PPO without exploration (20 updates of 128 episodes, behaviour cloning and self-imitation on) "
        "from chapter 4's checkpoint, changing only `method`: PPO (the critic, GAE, two epochs of the clipped loss), "
        "GRPO (no critic; an episode's advantage is its reward minus its task group's mean, over the group's standard "
        "deviation) and REINFORCE (no critic, no clip, no entropy bonus; the reward minus the batch's mean, one pass "
        "over the batch, so half the gradient steps and half the behaviour-cloning steps of the others). Its PPO runs "
        "have the settings of `PPO, no exploration` above. Seconds per run depend on what else ran on the machine at "
        "the time; they are not comparable across records.",
        labels, lambda record: (_run_seconds(record),),
        [(f"{labels[v]} − PPO", v, "ppo") for v in ("grpo", "reinforce")])
