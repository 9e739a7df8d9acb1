"""Chapter 10's Results page, the GPU records: the long GRPO run, its seeds (three runs), section 1's
table seed by seed, and the rollout engine on a GPU."""

from __future__ import annotations

from book_tools.results.common import ROLES, change_row, md_table, read_record, record_provenance, sampled_measure


def gpu_long_section() -> str:
    path = "notebooks/data/smollm2_gpu_long.json"
    record = read_record(path)
    if record is None:
        return ""
    from course_lib.stats import sign_test
    from course_lib.tasks import load_tasks
    start, long = (next(r for r in record["runs"] if r["model"] == m) for m in ("start", "grpo-long"))
    rl = record["rl"]
    sampled = sampled_measure(record["sampled"]["n_samples"], record["sampled"]["temperature"])
    measures = [(ROLES["train"], "greedy pass@1", "train_greedy_pass@1"),
                (ROLES["val"], "greedy pass@1", "val_greedy_pass@1"),
                (ROLES["test"], "greedy pass@1", "test_greedy_pass@1"),
                (ROLES["test"], sampled, "test_pass@1_from_samples"),
                ("HumanEval test (never trained on)", "greedy pass@1", "humaneval_test_greedy_pass@1"),
                ("HumanEval test (never trained on)", sampled, "humaneval_test_pass@1_from_samples")]
    rows = [[tasks, measure, f"{start[key]:.3f}", f"{long[key]:.3f}", f"{long[key] - start[key]:+.3f}"]
            for tasks, measure, key in measures]
    split_ids = {}
    for t in load_tasks():
        split_ids.setdefault(t.split, set()).add(t.id)
    changes = []
    for split in ("train", "val", "test"):
        ids = split_ids[split]
        before, after = set(start["greedy_passed_ids"]) & ids, set(long["greedy_passed_ids"]) & ids
        gained, lost = sorted(after - before), sorted(before - after)
        changes.append([ROLES[split], f"{len(before)} → {len(after)} of {len(ids)}", len(gained), len(lost),
                        f"{sign_test(len(gained), len(lost)):.3f}"])
    steps = long["steps_done"]
    return "\n\n".join([
        "## The long GRPO run on a GPU, one seed",
        f"The HumanEval protocol above (rollouts from {record['rollout_pool']}) with {rl['prompts_per_step']} "
        f"prompts x {rl['group_size']} samples a step, for as many steps as {record['train_seconds_budget']:.0f} s "
        f"of training allowed: {steps} steps, {steps * rl['prompts_per_step'] * rl['group_size']} completions, "
        f"random seed {record['seed']}. One seed gives no interval over seeds; the second table gives a sign test "
        "over the tasks whose greedy result changed. The trained adapter is in the course "
        "(`notebooks/data/smollm2_gpu_long_adapter`).",
        md_table(["tasks", "measure", "start", "trained (1 seed)", "change"], rows),
        md_table(["split", "greedy passes, start → trained", "gained", "lost", "sign test p"], changes),
        f"The start on all {start['humaneval164_tasks']} HumanEval problems: greedy "
        f"{start['humaneval164_greedy_passed']} of {start['humaneval164_tasks']}, "
        f"{sampled} {start['humaneval164_pass@1_from_samples']:.3f}.",
        record_provenance(record, path)])


def _gpu_seeds_section(path: str, title: str, lead: str) -> str:
    """A three-seed GPU record (benchmarks/smollm2_gpu_seeds.py): each measure's start, trained and paired change."""
    record = read_record(path)
    if record is None:
        return ""
    sampled = sampled_measure(record["sampled"]["n_samples"], record["sampled"]["temperature"])
    names = {"train_greedy": (ROLES["train"], "greedy pass@1"), "val_greedy": (ROLES["val"], "greedy pass@1"),
             "test_greedy": (ROLES["test"], "greedy pass@1"), "test_sampled": (ROLES["test"], sampled),
             "humaneval_test_greedy": ("HumanEval test (never trained on)", "greedy pass@1"),
             "humaneval_test_sampled": ("HumanEval test (never trained on)", sampled),
             "never_trained_greedy": ("all 48 never trained on", "greedy pass@1"),
             "never_trained_sampled": ("all 48 never trained on", sampled)}
    from course_lib.stats import mean_se
    rows = []
    for key, (tasks, measure) in names.items():
        c = record["changes"][key]
        rows.append([tasks, measure, f"{mean_se(c['start'])[0]:.3f}"] + change_row(c["trained"], c["start"]))
    rl = record["rl"]
    steps = [next(r for r in record["per_seed"][str(s)]["runs"] if r["model"] != "start")["steps_done"]
             for s in record["seeds"]]
    return "\n\n".join([
        f"## {title}",
        lead.format(seeds=record["seeds"], side_by_side=record["runs_side_by_side"],
                    budget=f"{record['train_seconds_budget']:.0f}", steps=" / ".join(map(str, steps)),
                    prompts=rl["prompts_per_step"], group=rl["group_size"], micro=rl["micro_batch_size"],
                    engine=rl.get("engine", "hf")),
        "Every seed measured its own start (the same greedy answers, its own samples), and each change is paired "
        f"with it; mean ± standard error over the {len(record['seeds'])} seeds. The 48 tasks never trained on "
        "pool the course's test split (15) and HumanEval's test problems (33).",
        md_table(["tasks", "measure", "start (mean of the seeds' starts)", "trained (mean ± SE)", "change ± SE",
                "t-interval", "verdict"], rows),
        record_provenance(record, path)])


def gpu_seeds_section() -> str:
    return _gpu_seeds_section(
        "notebooks/data/smollm2_gpu_seeds.json", "The long GRPO run on a GPU, three seeds",
        "The run above again for seeds {seeds}, {side_by_side} side by side on one GPU, {budget} s of training each "
        "({steps} steps of {prompts} prompts x {group} samples; each update summed over pieces of {micro} "
        "completions, the same update in less memory); Hugging Face's `generate` sampled the rollouts. Chapter "
        "10's section 1 shows the pooled rows.")


def gpu_seeds_fast_section() -> str:
    return _gpu_seeds_section(
        "notebooks/data/smollm2_gpu_seeds_fast.json", "The three GPU seeds again, with the fast engine sampling",
        "The same seeds {seeds} and settings, {side_by_side} side by side on one GPU, with the rollouts sampled by "
        "the course's fast engine (`engine` {engine}; the learner still scores every sampled id, and its "
        "log-probabilities are the old policy's) and more steps in {budget} s of training each ({steps} steps "
        "of {prompts} x {group}). The evaluation is the run above's (greedy and samples by Hugging Face's "
        "`generate`), so the starts are the same numbers. The next section times the two samplers on the same GPU.")


# the targets the long GPU run was set before it was made: steps per seed, train greedy pass@1 (mean of the seeds),
# greedy pass@1 on the 48 never-trained tasks as a multiple of the start's
LONG_RUN_TARGETS = {"steps": 100, "train": 0.8, "never_trained_ratio": 2}
_SHORT_NAMES = {"train_greedy": "train greedy", "val_greedy": "val greedy", "test_greedy": "test greedy",
                "test_sampled": "test sampled", "humaneval_test_greedy": "HumanEval greedy",
                "humaneval_test_sampled": "HumanEval sampled", "never_trained_greedy": "48-task greedy",
                "never_trained_sampled": "48-task sampled"}


def _never_trained_passed(row: dict) -> int:
    """Greedy passes on the 48 never-trained tasks (the course's test split and HumanEval's test problems)."""
    return row["test_greedy_passed"] + row["humaneval_test_greedy_passed"]


def gpu_seeds_long_section() -> str:
    path = "notebooks/data/smollm2_gpu_seeds_long.json"
    record = read_record(path)
    if record is None:
        return ""
    steps = [row["steps_done"] for row in record["runs"]]
    cap = record["rl"]["steps"]
    ended = (f"the cap was {cap} steps, and the training time ran out first" if min(steps) < cap
             else f"every seed reached the cap of {cap} steps")
    table = _gpu_seeds_section(
        path, "The three GPU seeds, trained longer",
        "The fast-engine run above made afresh, seeds {seeds}, {side_by_side} side by side on one GPU, with {budget} s of "
        "training each ({steps} steps of {prompts} x {group}; " + ended + "). Its evaluation samples with the fast "
        "engine too (greedy answers still come from `generate`), so its sampled starts are draws of their own, not "
        "the run above's.")
    changes, target = record["changes"], LONG_RUN_TARGETS
    train = changes["train_greedy"]["trained"]
    before = [_never_trained_passed(row["start"]) for row in record["runs"]]
    after = [_never_trained_passed(row["trained"]) for row in record["runs"]]
    he = changes["humaneval_test_greedy"]
    per_step = sum(row["trained"]["train_seconds"] for row in record["runs"]) / sum(steps)
    rows = [["RL steps per seed", f"at least {target['steps']}", " / ".join(map(str, steps)),
             "met" if min(steps) >= target["steps"] else "not met"],
            ["train greedy pass@1, mean of the seeds", f"at least {target['train']}",
             f"{sum(train) / len(train):.3f} (seeds: {', '.join(f'{t:.3f}' for t in train)})",
             "met" if sum(train) / len(train) >= target["train"] else "not met"],
            ["greedy pass@1 on the 48 never trained on, trained / start (tasks passed)",
             f"at least {target['never_trained_ratio']}x",
             f"{sum(after) / sum(before):.2f}x (seeds: {', '.join(f'{a} / {b}' for a, b in zip(after, before))})",
             "met" if sum(after) >= target["never_trained_ratio"] * sum(before) else "not met"],
            ["HumanEval test (never trained on), greedy pass@1", "a gain beyond the t-interval",
             f"{he['change_mean']:+.3f} ± {he['change_se']:.3f}",
             "met" if he["verdict"] == "a gain" else f"not met ({he['verdict']})"]]
    agreed = [_SHORT_NAMES[k] for k, c in changes.items() if c.get("change_se") == 0]
    parts = [table]
    if agreed:
        parts.append(f"Where every seed changed by the same amount ({', '.join(agreed)}), the standard error is zero: "
                     "the interval then shows only that the seeds agreed, not how far another seed could land.")
    parts += ["Against the targets set for a long GPU run before it was made (each row computed from the record "
              "above):", md_table(["measure", "target", "measured", "verdict"], rows)]
    if min(steps) < target["steps"]:
        parts.append(f"Side by side, a step took {per_step:.2f} s on average, so {target['steps']} steps would need "
                     f"about {target['steps'] * per_step:.0f} s of training a seed.")
    return "\n\n".join(parts)


_SECTION1_GPU = {"GPU run 1 (generate)": "notebooks/data/smollm2_gpu_seeds.json",
                 "GPU run 2 (fast engine)": "notebooks/data/smollm2_gpu_seeds_fast.json",
                 "GPU run 3 (fast engine, longer)": "notebooks/data/smollm2_gpu_seeds_long.json"}


_SECTION1_CPU = "notebooks/data/smollm2_cpu_seeds.json"


_SECTION1_SETS = (("all 48 never trained on", "never_trained_greedy", "never trained (48)", 48),
                  ("course test (15)", "test_greedy", "course test (15)", 15),
                  ("HumanEval test (33)", "humaneval_test_greedy", "HumanEval test (33)", 33))


def _seed_counts(starts: list[float], trained: list[float], n: int) -> tuple[str, str]:
    """Each seed's tasks passed, start -> trained ('5 -> 9, 5 -> 7'), and the verdict of the paired changes."""
    from course_lib.stats import seed_verdict
    counts = ", ".join(f"{round(a * n)} → {round(b * n)}" for a, b in zip(starts, trained))
    return counts, seed_verdict([b - a for a, b in zip(starts, trained)])


def section1_seeds_section() -> str:
    """Chapter 10's section 1 table, seed by seed and task set by task set, and what its ± cannot see."""
    gpu = {run: read_record(path) for run, path in _SECTION1_GPU.items()}
    cpu = read_record(_SECTION1_CPU)
    if cpu is None or any(r is None for r in gpu.values()):
        return ""
    rows = []
    for label, gpu_key, cpu_key, n in _SECTION1_SETS:
        for run, record in gpu.items():
            c = record["changes"][gpu_key]
            rows.append([label, run, *_seed_counts(c["start"], c["trained"], n)])
        starts = [cpu["start"][cpu_key]["greedy_pass@1"]] * len(cpu["runs"])
        rows.append([label, f"CPU ({len(cpu['runs'])} seeds, one shared start)",
                     *_seed_counts(starts, [r["result"][cpu_key]["greedy_pass@1"] for r in cpu["runs"]], n)])
    draws = gpu["GPU run 1 (generate)"]["changes"]["never_trained_sampled"]["start"]
    redrawn = ", ".join(f"{d:.3f}" for d in gpu["GPU run 3 (fast engine, longer)"]["changes"]["never_trained_sampled"]["start"])
    cpu_sampled = cpu["summary"]["never trained (48), pass@1_from_samples"]
    return "\n\n".join([
        "## Chapter 10's section 1, seed by seed",
        "The chapter's section 1 shows one table: the three GPU runs and the CPU run on the 48 tasks never trained "
        "on, mean ± standard error over the seeds. Here are the same greedy pass@1 results as tasks passed, seed "
        "by seed, for the 48 and for the two task sets they pool, with the verdict (`stats.seed_verdict`) of each "
        "row's paired changes:",
        md_table(["tasks", "run", "tasks passed, start → trained, seed by seed", "verdict"], rows),
        "A verdict depends on how well the seeds agree, not only on the mean: on the course's 15 test tasks, GPU "
        "runs 1 and 2 reach the same mean, but run 1's seeds spread more, and one seed's smaller gain is enough to bring zero "
        "into a three-seed interval.",
        "What the ± cannot see. A sampled start is one random draw, unlike a greedy one: on the 48 tasks the three "
        "GPU seeds drew pass@1 from 10 samples at T = 0.8 of " + ", ".join(f"{d:.3f}" for d in draws)
        + f" (a span of {max(draws) - min(draws):.3f}; GPU run 2's evaluation is run 1's, so its starts are the "
        f"same; run 3 drew {redrawn}). The five CPU seeds share one draw ({cpu_sampled['start']:.3f}): had it come "
        "out low by chance, "
        "every seed's change would look larger by the same amount, and the ± over seeds, which measures only how "
        "the seeds differ, cannot see it. The GPU's draws span more than the CPU gain's t-interval "
        f"({cpu_sampled['t_interval']:.3f}), so that gain is less sure than its verdict says. The GPU and CPU runs "
        "also differ in batch size, steps and rollout tasks, so why the GPU runs gained more greedily is not "
        "measured.",
        "*Records:* " + ", ".join(f"`{p}`" for p in (*_SECTION1_GPU.values(), _SECTION1_CPU))
        + "; each has its own section on this page, with its machine and the command that remakes it."])


def gpu_engine_section() -> str:
    path = "notebooks/data/smollm2_gpu_engines.json"
    record = read_record(path)
    if record is None:
        return ""
    step = record["config"]["grpo_step"]
    gen = [[r["engine"], r["rows"], r["tokens"], r["seconds"], r["tokens_per_s"]]
           for r in record["runs"] if r["measure"] == "generation"]
    kl = next(r for r in record["runs"] if r["measure"] == "sampler_kl")
    steps = [[r["engine"], r["step"], r["step_s"], r["generate_s"], r["sandbox_s"], r["score_s"], r["learn_s"],
              f"{r['reward']:.3f}", f"{r['avg_len']:.0f}"] for r in record["runs"] if r["measure"] == "grpo_step"]
    summary = record["summary"]
    return "\n\n".join([
        "## The rollout engine on a GPU",
        f"SmolLM2-135M-Instruct in float32 under a fresh LoRA, the GPU run's rollout: {step['prompts_per_step']} "
        f"chat prompts x {step['group_size']} samples in one batch, temperature 0.8, up to "
        f"{step['max_new_tokens']} new tokens, no stop sequence. Each engine was timed twice, alternating, and the "
        f"faster try is shown. The fast engine wrote {summary['generation_speedup']:.2f}x as many useful tokens "
        "per second:",
        md_table(["engine", "rows", "useful tokens", "seconds", "useful tokens/s"], gen),
        f"KL(fast engine || learner) per token on {kl['tokens']} tokens the fast engine sampled: mean "
        f"{kl['kl_mean']:.1e}, max {kl['kl_max']:.1e} (float32 rounding). Then {step['steps']} GRPO steps of the "
        f"GPU run's settings from the start with each sampler, by part, in seconds (the first step of a process "
        "pays for its allocations; a sandbox part near 2 s is one program that ran into the 2 s time limit). "
        f"After the first step, a step took {summary['step_s_after_the_first']['hf']:.2f} s with `generate` and "
        f"{summary['step_s_after_the_first']['fast']:.2f} s with the fast engine "
        f"({summary['step_speedup']:.2f}x):",
        md_table(["sampler", "step", "seconds", "generate", "sandbox", "score (log pi_old)", "learn", "reward",
                "mean length"], steps),
        record_provenance(record, path)])
