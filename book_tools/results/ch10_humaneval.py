"""Chapter 10's Results page, HumanEval: the DeepSeek-Coder report's protocol on SmolLM2, the test problems
gained and lost seed by seed, and the course's own CPU runs re-measured on HumanEval."""

from __future__ import annotations

from pathlib import Path

from book_tools.results.common import (CPU_SPLITS, ROLES, change_row, md_table, read_record, record_provenance,
    sampled_measure)


def _never_trained(row: dict) -> float:
    """Greedy pass@1 over the 48 tasks never trained on: the course's test split and HumanEval's test problems."""
    return ((row["test_greedy_passed"] + row["humaneval_test_greedy_passed"])
            / (row["test_tasks"] + row["humaneval_test_tasks"]))


def humaneval_protocol_section() -> str:
    path = "notebooks/data/smollm2_humaneval_rl.json"
    record = read_record(path)
    if record is None:
        return ""
    from course_lib.stats import seed_verdict
    start = next(r for r in record["runs"] if r["model"] == "start")
    runs = sorted((r for r in record["runs"] if r["model"] != "start"), key=lambda r: r["seed"])
    sampled = sampled_measure(record["sampled"]["n_samples"], record["sampled"]["temperature"])
    measures = [(ROLES[split], sampled if kind else "greedy pass@1", lambda r, key=key: r[key])
                for split, key, kind in CPU_SPLITS]
    measures += [("HumanEval test (never trained on)", "greedy pass@1", lambda r: r["humaneval_test_greedy_pass@1"]),
                 ("all 48 never trained on (course test + HumanEval test)", "greedy pass@1", _never_trained)]
    rows = [[tasks, measure, f"{value(start):.3f}"] + change_row([value(r) for r in runs], value(start))
            + [seed_verdict([value(r) - value(start) for r in runs[:3]])]
            for tasks, measure, value in measures]
    course = read_record("notebooks/data/smollm2_rl.json")
    groups = ""
    if course is not None:
        from course_lib.stats import mean_se
        seeds = [r["seed"] for r in runs]
        course_runs = {r["seed"]: r for r in course["runs"] if r["model"] != "start"}
        with_he = mean_se([c["groups_with_a_pass"] for r in runs for c in r["curve"]])[0]
        without = mean_se([c["groups_with_a_pass"] for s in seeds if s in course_runs
                           for c in course_runs[s]["curve"]])[0]
        groups = (f" A step had {with_he:.2f} groups (of {record['rl']['prompts_per_step']}) with a passing sample "
                  f"on average, against {without:.2f} in the GRPO run above without HumanEval's problems: most "
                  "HumanEval groups fail together, and a group that all fails teaches nothing.")
    rl = record["rl"]
    return "\n\n".join([
        "## The DeepSeek-Coder LoRA-RL report's protocol: HumanEval's training problems rewarded too",
        f"The GRPO run above ({rl['steps']} steps of {rl['prompts_per_step']} prompts x {rl['group_size']}), with "
        f"the rollouts drawn from {record['rollout_pool']} (`--rollout-humaneval`), seeds {record['seeds']}. Two "
        "sets of tasks never trained on are measured: the course's test split (15) and HumanEval's test problems "
        "(33). The last column is what the first three seeds alone would say (a wider t-interval)." + groups,
        md_table(["tasks", "measure", "start", "trained (mean ± SE)", "change ± SE", "t-interval", "verdict",
                "verdict, first 3 seeds"], rows),
        record_provenance(record, path)])


def _he_names() -> dict:
    from course_lib.tasks import load_humaneval
    return {t.id: t.entry_point for t in load_humaneval("test")}


def _he_problem(task_id: str, names: dict) -> str:
    return f"`{names.get(task_id, task_id)}` ({task_id})"


def humaneval_problems_section() -> str:
    path = "notebooks/data/smollm2_humaneval_problems.json"
    record = read_record(path)
    start = read_record("notebooks/data/smollm2_start_sampled.json")
    if record is None or start is None:
        return ""
    names = _he_names()
    runs = sorted(record["runs"], key=lambda r: r["seed"])
    per_seed = [[r["seed"], len(r["passed"]), ", ".join(_he_problem(i, names) for i in r["gained"]) or "none",
                 ", ".join(_he_problem(i, names) for i in r["lost"]) or "none"] for r in runs]
    start_rows = {r["id"]: r for r in start["humaneval"]["per_task"] if r["split"] == "test"}
    lost = {i: sum(i in r["lost"] for r in runs) for i in start_rows}
    gained = {i: sum(i in r["gained"] for r in runs) for i in start_rows}
    shown = record["start_passed"] + sorted(i for i in gained if gained[i] and i not in record["start_passed"])
    problems = [[_he_problem(i, names), "passes" if start_rows[i]["greedy_passed"] else "fails",
                 f"{start_rows[i]['c']} of {start_rows[i]['n']}", lost[i], gained[i]] for i in shown]
    endings = []
    for r in runs:
        for i in r["gained"] + r["lost"]:
            a = r["answers"][i]
            failing = a["start"] if a["trained"]["passed"] else a["trained"]
            endings.append([r["seed"], _he_problem(i, names), "gained" if a["trained"]["passed"] else "lost",
                            "at the token limit" if failing["finish"] == "length" else "by itself (`<eos>`)",
                            f"{len(a['start']['answer'].splitlines())} → {len(a['trained']['answer'].splitlines())}"])
    return "\n\n".join([
        "### Which HumanEval problems moved",
        f"`{record['script']}` reran the six seeds of the record above with the same code (each rerun "
        f"reproduced its row: the training curve step by step and the count of problems passed) and kept every "
        f"model's greedy answer to HumanEval's test problems (never trained on). The start passes "
        f"{len(record['start_passed'])} of 33 greedily.",
        md_table(["seed", "HumanEval test problems passed (greedy, of 33)", "gained", "lost"], per_seed),
        f"Each problem the start passes or a seed gained, with how many of the start's "
        f"{start['humaneval']['n_samples']} samples at T = {start['humaneval']['temperature']} pass it "
        "(the start's record above). The problems lost are ones the start passes greedily while few of its samples "
        "do; no rollout rewarded them, so nothing held their answers in place while the weights moved for other "
        "tasks.",
        md_table(["problem", "start, greedy", "start's samples that pass", "seeds that lost it",
                "seeds that gained it"], problems),
        "Every change: how the failing answer's generation ended, and the function's length in lines, start → "
        "trained:",
        md_table(["seed", "problem", "change", "failing answer ended", "lines, start → trained"], endings),
        record_provenance(record, path)])


def course_humaneval_section() -> str:
    path = "notebooks/data/smollm2_rl_humaneval.json"
    record = read_record(path)
    course = read_record("notebooks/data/smollm2_rl.json")
    start_sampled = read_record("notebooks/data/smollm2_start_sampled.json")
    if record is None or course is None or start_sampled is None:
        return ""
    names = _he_names()
    start = next(r for r in course["runs"] if r["model"] == "start")
    trained = {r["seed"]: r for r in course["runs"] if r["model"] != "start"}
    runs = sorted(record["runs"], key=lambda r: r["seed"])
    n_he = len(names)
    n_test = start["test_tasks"]
    n_all = n_he + n_test
    he_start_greedy = len(record["start_passed"])
    he_start_sampled = start_sampled["humaneval"]["test_pass@1"]
    sampled = sampled_measure(record["sampled"]["n_samples"], record["sampled"]["temperature"])
    course_sampled = sampled_measure(course["sampled"]["n_samples"], course["sampled"]["temperature"])
    measures = [
        ("HumanEval test (never trained on)", "greedy pass@1", he_start_greedy / n_he,
         [len(r["passed"]) / n_he for r in runs]),
        ("HumanEval test (never trained on)", sampled, he_start_sampled,
         [r["humaneval_test_pass@1_from_samples"] for r in runs]),
        (f"all {n_all} never trained on", "greedy pass@1", (start["test_greedy_passed"] + he_start_greedy) / n_all,
         [(trained[r["seed"]]["test_greedy_passed"] + len(r["passed"])) / n_all for r in runs]),
        (f"all {n_all} never trained on", f"course test: {course_sampled}; HumanEval: {sampled}; weighted by tasks",
         (start["test_pass_rate"] * n_test + he_start_sampled * n_he) / n_all,
         [(trained[r["seed"]]["test_pass_rate"] * n_test + r["humaneval_test_pass@1_from_samples"] * n_he) / n_all
          for r in runs])]
    rows = [[tasks, measure, f"{s:.3f}"] + change_row(values, s) for tasks, measure, s, values in measures]
    per_seed = [[r["seed"], len(r["passed"]), ", ".join(_he_problem(i, names) for i in r["gained"]) or "none",
                 ", ".join(_he_problem(i, names) for i in r["lost"]) or "none"] for r in runs]
    return "\n\n".join([
        "## HumanEval after the run that never saw it",
        f"The six seeds of the GRPO run above (`{Path(record['record']).name}`: rollouts from the course's train "
        f"and val tasks only) rerun by `{record['script']} --protocol course` on {record['machine']} (the record "
        "was made on another processor; every step's rewards, pass rates, lengths and groups with a pass equal the "
        "record's, and the float diagnostics agree up to last-digit differences), each trained model measured on "
        "HumanEval's 33 test problems greedily and from samples. The course test counts come from the record. "
        "The start's sampled rates carry sampling noise of their own, which the ± leaves out.",
        md_table(["tasks", "measure", "start", "trained (mean ± SE)", "change ± SE", "t-interval", "verdict"], rows),
        f"HumanEval test problems, greedy; the start passes "
        f"{', '.join(_he_problem(i, names) for i in record['start_passed'])}:",
        md_table(["seed", "passed (of 33)", "gained", "lost"], per_seed),
        record_provenance(record, path)])
