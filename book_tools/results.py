"""The book's Results part: one page per chapter with records, written from the record files.

A chapter keeps the one table that carries its lesson; the experiment records behind it (seed
tables, speed measurements, GPU runs) are shown here, each with the device, seeds, date and the
command that remakes it. Every table on these pages is computed from a record file in
notebooks/data/ (the one records folder), never typed in:

    python -m book_tools.results            rewrite book/results/*.md from the records
    python -m book_tools.results --check    exit 1 if a page differs from what the records give (a test runs it)
"""

from __future__ import annotations

import argparse
import functools
import json
import re
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


@functools.cache
def _remake_commands() -> dict[str, str]:
    """record path -> the command that remakes it, from benchmarks/experiments.toml (read once)."""
    from book_tools.reproduce import experiments

    return {e["path"]: e["command"] for e in experiments()}


def _provenance(record: dict, path: str) -> str:
    """The record's device, machine, date and the command that remakes it, as benchmarks/experiments.toml (the
    one list of the records and their commands) gives it."""
    command = _remake_commands().get(path)
    if command is None:
        raise KeyError(f"{path} is not in benchmarks/experiments.toml: list it there with the command that remakes it")
    return (f"*Record:* `{path}`. *Device:* {record.get('device', 'cpu')}; *machine:* "
            f"{record.get('machine', 'not recorded')}. "
            f"*Date:* {record.get('date', 'not recorded')}. *Remake:* `{command}`.")


def engine_section() -> str:
    path = "notebooks/data/generation_throughput.json"
    record = _read(path)
    if record is None:
        return ""
    engines = [e for e in ("hf", "fast", "fast-bf16") if e in record["runs"][0]["settings"]["rollout"]]
    rows = []
    for run in record["runs"]:
        for setting, label in (("rollout", "the CPU recipe's rollout: 4 prompts x 4 samples"),
                               ("batch-32", "32 prompts, batch 32")):
            r = run["settings"][setting]
            rows.append([run["capability"], label] + [r[e]["tokens_per_s"] for e in engines]
                        + [f"{r[e]['tokens_per_s'] / r['hf']['tokens_per_s']:.2f}x" for e in engines[1:]])
    steps = []
    for run in record["runs"]:
        for setup, s in run["grpo_step"].items():
            kl = s["row"].get("sampler_kl")
            kl = ("none: the learner samples" if kl is None else f"{kl:.1e}" if abs(kl) >= 1e-6 else "below 1e-6")
            steps.append([run["capability"], setup, s["step_s"], s["generate_s"], s["sandbox_s"], s["score_s"],
                          s["learn_s"], f"{s['speedup']:.2f}x", kl])
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
        "One GRPO step of the CPU recipe's settings (4 x 4, 2 epochs, KL 0.05) from the start, in seconds, by part, "
        "its speed-up over the step as it ran before the fast engine, and the step's logged KL(sampler || learner) "
        "per token (estimated on the sampled tokens, so it can come out slightly negative). *before*: Hugging "
        "Face's `generate`, and the learner scoring all 16 rows in one padded pass; *one pass* / *chunked*: the "
        "learner scores all rows at once, or rows of similar length together (`score_tokens`, the default); "
        "*bf16 learner*: the learner's passes under bfloat16 autocast (`learner_dtype`). The learn part is the "
        "reference's pass and two epochs of forward and backward passes. Each setup was timed twice, alternating "
        "with the others, and the faster try is shown:",
        _table(["CPU capability", "setup", "step", "generate", "sandbox", "score (log pi_old)", "learn",
                "speed-up", "sampler KL"], steps),
        "KL per token between each sampler's next-token distribution and the learner's, on the same prefixes "
        "(mean / max). int8 weights with one scale per activation matrix (fbgemm) were a candidate; this KL "
        "rules them out:",
        _table(["CPU capability"] + samplers, kl),
        _provenance(record, path)])


def engine_candidates_section() -> str:
    """Other rollout engines on the same CPU rollout: speed, what a new policy costs each, and the KL to the learner."""
    path = "notebooks/data/engine_candidates.json"
    record = _read(path)
    if record is None:
        return ""

    def kl(row: dict) -> str:
        k = row.get("kl") or {}
        if not k:
            return "the learner itself" if row["candidate"] == "hf" else "not measured"
        return "below 1e-6" if abs(k["kl_mean"]) < 1e-6 else f"{k['kl_mean']:.1e} / {k['kl_max']:.1e}"

    rows = [[r["candidate"], r["precision"], r["tokens_per_s"], f"{r['ratio_to_hf']:.2f}x",
             "no cheap route" if r["update"]["update_s"] is None else f"{r['update']['update_s']:.3f}", kl(r)]
            for r in record["runs"]]
    bound = record["summary"]["matmul_ceiling"]
    hf = record["summary"]["tokens_per_s"]["hf"]
    return "\n\n".join([
        "## Other rollout engines on the same rollout",
        f"The CPU recipe's rollout ({record['config']['rollouts'][0]['samples_per_prompt']} samples of each of 4 "
        f"prompts, twice; T = {record['config']['temperature']}, up to {record['config']['max_new_tokens']} new "
        "tokens) through engines outside the course, beside Hugging Face's `generate` (`hf`) and the course's fast "
        "engine: llama.cpp (llama-cpp-python) on the GGUF file the course loads, with the LoRA applied at run time "
        "or merged into a float32 file; CTranslate2 and onnxruntime-genai on the merged weights; and `generate` "
        "with a static cache under `torch.compile`. The policy changes at every RL step, so each engine's cost of "
        "taking new weights is part of its price. KL per token to the learner (mean / max) on prefixes the learner "
        "sampled. Each engine was timed twice, alternating, the faster try shown; the record keeps both tries and "
        "the machine's load (another process shared the two cores during some tries).",
        _table(["engine", "weights", "useful tokens/s", "/ hf", "new weights, s per step", "KL to the learner"], rows),
        f"The matrix products of one 16-row decode step alone run at {bound['float32']['gflop_per_s']} GFLOP/s in "
        f"float32 and {bound['bfloat16']['gflop_per_s']} in bfloat16 here: no float32 engine built on these kernels "
        f"can pass {bound['float32']['tokens_per_s']:.0f} useful tokens/s "
        f"({bound['float32']['tokens_per_s'] / hf:.1f}x `generate`), and a bfloat16 one "
        f"{bound['bfloat16']['tokens_per_s']:.0f}, before attention, sampling and rows that end early.",
        _provenance(record, path)])


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


def _measure(n: int, temperature) -> str:
    return f"pass@1 from {n} samples at T = {temperature}"


_CPU_SPLITS = (("train", "train_greedy_pass@1", None), ("val", "val_greedy_pass@1", None),
               ("test", "test_greedy_pass@1", None), ("test", "test_pass_rate", "sampled"))


def _change_row(values: list[float], start) -> list:
    """[trained mean ± SE, change ± SE, t-interval, verdict] of per-seed values against a start (one number,
    or one per seed, paired)."""
    from course_lib.stats import mean_se, seed_verdict, t_factor
    starts = start if isinstance(start, list) else [start] * len(values)
    changes = [v - s for v, s in zip(values, starts)]
    change, se = mean_se(changes)
    return [_pm(values), f"{change:+.3f} ± {se:.3f}", f"{t_factor(len(changes)) * se:.3f}", seed_verdict(changes)]


def _paired_rows(record: dict, label: str) -> list[list]:
    """Rows of one record of start + trained seeds: each measure's start, trained mean ± SE, paired change, verdict."""
    start = next(r for r in record["runs"] if r["model"] == "start")
    trained = sorted((r for r in record["runs"] if r["model"] != "start"), key=lambda r: r["seed"])
    sampled = _measure(record["sampled"]["n_samples"], record["sampled"]["temperature"])
    return [[label, len(trained), ROLES[split], sampled if kind else "greedy pass@1", f"{start[key]:.3f}"]
            + _change_row([r[key] for r in trained], start[key]) for split, key, kind in _CPU_SPLITS]


def start_sampled_section() -> str:
    path = "notebooks/data/smollm2_start_sampled.json"
    record = _read(path)
    if record is None:
        return ""
    he = record["humaneval"]
    rows = [[f"course {ROLES[s]}", record[f"{s}_tasks"], f"{record[f'{s}_greedy_pass@1']:.3f}",
             f"{record[f'{s}_pass@1']:.3f}", f"{record[f'{s}_pass@10']:.3f}"] for s in ("train", "val", "test")]
    rows += [[label, he[f"{s}_tasks"], f"{he[f'{s}_greedy_pass@1']:.3f}", f"{he[f'{s}_pass@1']:.3f}",
              f"{he[f'{s}_pass@10']:.3f}"]
             for s, label in (("train", "HumanEval train (rewarded only in the HumanEval-protocol runs below)"),
                              ("test", "HumanEval test (never trained on)"))]
    n_he = he["train_tasks"] + he["test_tasks"]
    he_all = sum(he[f"{s}_pass@1"] * he[f"{s}_tasks"] for s in ("train", "test")) / n_he
    n, temperature = record["n_samples"], record["temperature"]
    return "\n\n".join([
        "## The start: SmolLM2-135M-Instruct before any RL",
        f"The model with no adapter, asked through its chat template, up to {record['max_new_tokens']} new tokens: "
        f"one greedy answer per task, and {n} samples per task at T = {temperature}. Sampled answers pass less "
        "often than the greedy one, yet for most of the course's tasks one of ten samples passes: the right "
        "answer is often within the model's reach, which is what RL can make likelier. HumanEval is far harder "
        f"for it: {_measure(n, temperature)} over all {n_he} HumanEval problems is {he_all:.3f}.",
        _table(["tasks", "count", "greedy pass@1", _measure(n, temperature), f"pass@{n} from {n} samples"], rows),
        _provenance(record, path)])


def _ignored_kl_note(records: list[tuple[str, dict]]) -> str:
    """A sentence for the records whose settings name a KL weight their run did not use: REINFORCE and PPO runs made
    before the method table (records without a code_revision), whose loop set the KL weight of those two methods
    to 0 whatever the settings said."""
    ignored = {label: r["rl"]["kl_coef"] for label, r in records if r["rl"].get("method") in ("reinforce", "ppo")
               and r["rl"].get("kl_coef", 0) > 0 and not r.get("code_revision")}
    if not ignored:
        return ""
    weights = " and ".join(sorted({str(k) for k in ignored.values()}))
    return (f" The {' and '.join(ignored)} records' settings say kl_coef {weights}, but "
            "the loop that made them used no KL term for those methods (it set their KL weight to 0); "
            "today's settings refuse a KL weight with REINFORCE.")


def _sampler(record: dict) -> str:
    """What sampled a record's rollouts: its rl_config's engine (records made by benchmarks/smollm2_rl.py's studies),
    else Hugging Face's `generate` (the records made before the course's sampler, which name no engine)."""
    engine = record.get("rl_config", {}).get("engine")
    if engine is None or "loop" in record:  # TRL's GRPOTrainer samples with generate, whatever the engine says
        return "Hugging Face's `generate`"
    return {"auto": "the course's sampler (`course_lib.lm.decode`; engine auto)", "hf": "Hugging Face's `generate`",
            "fast": "the course's sampler (`course_lib.lm.decode`)"}.get(engine, f"engine {engine}")


def _sampling_note(loaded: list) -> tuple[str, str]:
    """The section's title and how its seeds are paired (loaded: (label, path, record) each): what sampled each
    record's rollouts, whose start each record used, and, where the records measured more than one start, how far
    apart the same model's sampled rates are."""
    samplers = {}
    for label, _, record in loaded:
        samplers.setdefault(_sampler(record), []).append(label)
    title = "## Three methods on the CPU" + (f", made with {next(iter(samplers))} sampling" if len(samplers) == 1 else "")
    starts = {label: next(r for r in record["runs"] if r["model"] == "start") for label, _, record in loaded}
    measured = [label for label, start in starts.items() if "from" not in start]
    if len(measured) <= 1:
        return title, ("Each trained seed is paired with the one start (its greedy answers have no sampling noise; its "
                       "sampled pass rate does, which the ± leaves out)")
    scores = {}
    for label, start in starts.items():
        scores.setdefault(f"{start['test_pass_rate']:.3f}", []).append(label)
    text = [f"{', '.join(labels)}: rollouts sampled by {s}." for s, labels in samplers.items()] if len(samplers) > 1 else []
    text.append(f"{', '.join(measured)}: each record measured its start with the code, and on the machine, that trained "
                "it" + "".join(f"; {label} reuses the start of `{Path(start['from']).name}`"
                               for label, start in starts.items() if "from" in start) + ".")
    text.append("Each trained seed is paired with its own record's start. The start's greedy answers have no sampling "
                "noise; its sampled pass rate does, which the ± leaves out")
    if len(scores) > 1:
        text[-1] += (": the same start scores " + " and ".join(f"{v} ({', '.join(labels)})"
                                                          for v, labels in sorted(scores.items()))
                     + " from samples in these records, so a change in the sampled rate smaller than that gap is no "
                     "evidence")
    return title, " ".join(text)


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
    title, pairing = _sampling_note(loaded)
    parts = [
        title,
        "SmolLM2-135M-Instruct with a fresh LoRA, through its chat template, the course's train and val tasks as "
        f"the rollout pool ({settings}); reward 1 if every test passes, else 0. {pairing}. Mean ± standard error "
        "over the seeds; a change counts only beyond the t-interval."
        + _ignored_kl_note([(label, record) for label, _, record in loaded]),
        _table(["method", "seeds", "split", "measure", "start", "trained (mean ± SE)", "change ± SE", "t-interval",
                "verdict"], rows)]
    by_label = {label: record for label, _, record in loaded}
    if "GRPO" in by_label and "GRPO in TRL's GRPOTrainer" in by_label:
        course = {r["seed"]: r for r in by_label["GRPO"]["runs"] if r["model"] != "start"}
        trl = {r["seed"]: r for r in by_label["GRPO in TRL's GRPOTrainer"]["runs"] if r["model"] != "start"}
        seeds = sorted(set(course) & set(trl))
        sampled = _measure(by_label["GRPO"]["sampled"]["n_samples"], by_label["GRPO"]["sampled"]["temperature"])
        diff = [[ROLES[split], sampled if kind else "greedy pass@1", len(seeds)]
                + _paired([trl[s][key] for s in seeds], [course[s][key] for s in seeds])
                for split, key, kind in _CPU_SPLITS]
        parts += [
            "TRL's `GRPOTrainer` runs the same GRPO once its defaults are set to the course's "
            "(`course_lib.lm.trl_grpo.trl_settings`): `beta` (the KL weight; TRL's default 0 means no reference "
            "model), the learning rate and its schedule (TRL's default suits training every weight, not a LoRA "
            "that starts at zero), `loss_type` (how per-token losses are averaged: `grpo` weighs a short "
            "completion's tokens more, the length bias Dr. GRPO describes; `dapo` weighs every token the same, as "
            "the course's `masked_mean` does), `scale_rewards` (`group` divides by the group's standard deviation, "
            "as the course does; Dr. GRPO recommends `none`) and, on a CPU, float32 and the key-value cache. TRL "
            "draws prompts and samples with its own random numbers, so the same seed number gives other samples "
            "in the two loops. TRL minus the course's loop, by seed number:",
            _table(["split", "measure", "seeds", "TRL − course, change ± SE", "t-interval", "per seed", "verdict"],
                   diff)]
    parts.append("\n".join("- " + _provenance(record, path) for _, path, record in loaded))
    return "\n\n".join(parts)


def _never_trained(row: dict) -> float:
    """Greedy pass@1 over the 48 tasks never trained on: the course's test split and HumanEval's test problems."""
    return ((row["test_greedy_passed"] + row["humaneval_test_greedy_passed"])
            / (row["test_tasks"] + row["humaneval_test_tasks"]))


def humaneval_protocol_section() -> str:
    path = "notebooks/data/smollm2_humaneval_rl.json"
    record = _read(path)
    if record is None:
        return ""
    from course_lib.stats import seed_verdict
    start = next(r for r in record["runs"] if r["model"] == "start")
    runs = sorted((r for r in record["runs"] if r["model"] != "start"), key=lambda r: r["seed"])
    sampled = _measure(record["sampled"]["n_samples"], record["sampled"]["temperature"])
    measures = [(ROLES[split], sampled if kind else "greedy pass@1", lambda r, key=key: r[key])
                for split, key, kind in _CPU_SPLITS]
    measures += [("HumanEval test (never trained on)", "greedy pass@1", lambda r: r["humaneval_test_greedy_pass@1"]),
                 ("all 48 never trained on (course test + HumanEval test)", "greedy pass@1", _never_trained)]
    rows = [[tasks, measure, f"{value(start):.3f}"] + _change_row([value(r) for r in runs], value(start))
            + [seed_verdict([value(r) - value(start) for r in runs[:3]])]
            for tasks, measure, value in measures]
    course = _read("notebooks/data/smollm2_rl.json")
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
        _table(["tasks", "measure", "start", "trained (mean ± SE)", "change ± SE", "t-interval", "verdict",
                "verdict, first 3 seeds"], rows),
        _provenance(record, path)])


def _he_names() -> dict:
    from course_lib.tasks import load_humaneval
    return {t.id: t.entry_point for t in load_humaneval("test")}


def _he_problem(task_id: str, names: dict) -> str:
    return f"`{names.get(task_id, task_id)}` ({task_id})"


def humaneval_problems_section() -> str:
    path = "notebooks/data/smollm2_humaneval_problems.json"
    record = _read(path)
    start = _read("notebooks/data/smollm2_start_sampled.json")
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
        _table(["seed", "HumanEval test problems passed (greedy, of 33)", "gained", "lost"], per_seed),
        f"Each problem the start passes or a seed gained, with how many of the start's "
        f"{start['humaneval']['n_samples']} samples at T = {start['humaneval']['temperature']} pass it "
        "(the start's record above). The problems lost are ones the start passes greedily while few of its samples "
        "do; no rollout rewarded them, so nothing held their answers in place while the weights moved for other "
        "tasks.",
        _table(["problem", "start, greedy", "start's samples that pass", "seeds that lost it",
                "seeds that gained it"], problems),
        "Every change: how the failing answer's generation ended, and the function's length in lines, start → "
        "trained:",
        _table(["seed", "problem", "change", "failing answer ended", "lines, start → trained"], endings),
        _provenance(record, path)])


def course_humaneval_section() -> str:
    path = "notebooks/data/smollm2_rl_humaneval.json"
    record = _read(path)
    course = _read("notebooks/data/smollm2_rl.json")
    start_sampled = _read("notebooks/data/smollm2_start_sampled.json")
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
    sampled = _measure(record["sampled"]["n_samples"], record["sampled"]["temperature"])
    course_sampled = _measure(course["sampled"]["n_samples"], course["sampled"]["temperature"])
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
    rows = [[tasks, measure, f"{s:.3f}"] + _change_row(values, s) for tasks, measure, s, values in measures]
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
        _table(["tasks", "measure", "start", "trained (mean ± SE)", "change ± SE", "t-interval", "verdict"], rows),
        f"HumanEval test problems, greedy; the start passes "
        f"{', '.join(_he_problem(i, names) for i in record['start_passed'])}:",
        _table(["seed", "passed (of 33)", "gained", "lost"], per_seed),
        _provenance(record, path)])


def gpu_long_section() -> str:
    path = "notebooks/data/smollm2_gpu_long.json"
    record = _read(path)
    if record is None:
        return ""
    from course_lib.stats import sign_test
    from course_lib.tasks import load_tasks
    start, long = (next(r for r in record["runs"] if r["model"] == m) for m in ("start", "grpo-long"))
    rl = record["rl"]
    sampled = _measure(record["sampled"]["n_samples"], record["sampled"]["temperature"])
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
        _table(["tasks", "measure", "start", "trained (1 seed)", "change"], rows),
        _table(["split", "greedy passes, start → trained", "gained", "lost", "sign test p"], changes),
        f"The start on all {start['humaneval164_tasks']} HumanEval problems: greedy "
        f"{start['humaneval164_greedy_passed']} of {start['humaneval164_tasks']}, "
        f"{sampled} {start['humaneval164_pass@1_from_samples']:.3f}.",
        _provenance(record, path)])


def _gpu_seeds_section(path: str, title: str, lead: str) -> str:
    """A three-seed GPU record (benchmarks/smollm2_gpu_seeds.py): each measure's start, trained and paired change."""
    record = _read(path)
    if record is None:
        return ""
    sampled = _measure(record["sampled"]["n_samples"], record["sampled"]["temperature"])
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
        rows.append([tasks, measure, f"{mean_se(c['start'])[0]:.3f}"] + _change_row(c["trained"], c["start"]))
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
        _table(["tasks", "measure", "start (mean of the seeds' starts)", "trained (mean ± SE)", "change ± SE",
                "t-interval", "verdict"], rows),
        _provenance(record, path)])


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


def gpu_seeds_long_section() -> str:
    path = "notebooks/data/smollm2_gpu_seeds_long.json"
    table = _gpu_seeds_section(
        path, "The three GPU seeds, trained longer",
        "The fast-engine run above made afresh, seeds {seeds}, {side_by_side} side by side on one GPU, with {budget} s of "
        "training each ({steps} steps of {prompts} x {group}; the cap was 100 steps, and the training time ran out "
        "first). Its evaluation samples with the fast engine too (greedy answers still come from `generate`), so "
        "its sampled starts are draws of their own, not the run above's.")
    record = _read(path)
    if not table or record is None:
        return table
    changes = record["changes"]
    steps = [row["steps_done"] for row in record["runs"]]
    train = changes["train_greedy"]["trained"]
    start48, after48 = changes["never_trained_greedy"]["start"], changes["never_trained_greedy"]["trained"]
    ratios = [b / a for a, b in zip(start48, after48)]
    he = changes["humaneval_test_greedy"]
    per_step = sum(row["trained"]["train_seconds"] for row in record["runs"]) / sum(steps)
    rows = [["RL steps per seed", "at least 100", " / ".join(map(str, steps)),
             "met" if min(steps) >= 100 else "not met"],
            ["train greedy pass@1, mean of the seeds", "at least 0.8", f"{sum(train) / len(train):.3f} "
             f"(seeds: {', '.join(f'{t:.3f}' for t in train)})", "met" if sum(train) / len(train) >= 0.8 else "not met"],
            ["greedy pass@1 on the 48 never trained on, trained / start", "at least 2x",
             f"{sum(after48) / sum(start48):.2f}x (seeds: {', '.join(f'{r:.2f}x' for r in ratios)})",
             "met" if sum(after48) / sum(start48) >= 2 else "not met"],
            ["HumanEval test (never trained on), greedy pass@1", "a gain beyond the t-interval",
             f"{he['change_mean']:+.3f} ± {he['change_se']:.3f}", "met" if he["verdict"] == "a gain" else f"not met ({he['verdict']})"]]
    return "\n\n".join([
        table,
        "Where all three seeds passed the same tasks (the val and test greedy rows), the standard error is zero: the "
        "interval then shows only that the seeds agreed, not how far another seed could land.",
        "Against the targets set for a long GPU run before it was made (each row computed from the record above):",
        _table(["measure", "target", "measured", "verdict"], rows),
        f"The steps fell short because the run, three seeds and their evaluations, was sized to finish in ten "
        f"minutes on one GPU: side by side, a step took {per_step:.2f} s on average, so 100 steps would need about "
        f"{100 * per_step:.0f} s of training alone."])


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
    gpu = {run: _read(path) for run, path in _SECTION1_GPU.items()}
    cpu = _read(_SECTION1_CPU)
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
        _table(["tasks", "run", "tasks passed, start → trained, seed by seed", "verdict"], rows),
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
    record = _read(path)
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
        _table(["engine", "rows", "useful tokens", "seconds", "useful tokens/s"], gen),
        f"KL(fast engine || learner) per token on {kl['tokens']} tokens the fast engine sampled: mean "
        f"{kl['kl_mean']:.1e}, max {kl['kl_max']:.1e} (float32 rounding). Then {step['steps']} GRPO steps of the "
        f"GPU run's settings from the start with each sampler, by part, in seconds (the first step of a process "
        "pays for its allocations; a sandbox part near 2 s is one program that ran into the 2 s time limit). "
        f"After the first step, a step took {summary['step_s_after_the_first']['hf']:.2f} s with `generate` and "
        f"{summary['step_s_after_the_first']['fast']:.2f} s with the fast engine "
        f"({summary['step_speedup']:.2f}x):",
        _table(["sampler", "step", "seconds", "generate", "sandbox", "score (log pi_old)", "learn", "reward",
                "mean length"], steps),
        _provenance(record, path)])


# Chapter 4: the side study on task variants (benchmarks/variants_pretraining.py). Every rate below is
# greedy (no sampling); a variant counts only if its output equals its body character for character.

_VARIANTS_CPU = "notebooks/data/variants_pretraining.json"
_VARIANTS_GPU = {"same_data_seed0": "same data, 4x the updates",
                 "two_digit_seed0": "two-digit blanks, hidden 512", "two_digit_seed1": "two-digit blanks, hidden 512",
                 "two_digit_seed2": "two-digit blanks, hidden 512"}
_VARIANTS_COMMITTED = "not in the record; the file was committed on 2026-11-22"


def _docstring(prompt: str) -> str:
    return prompt.split('"""')[1]


def _program(code: str) -> str:
    """A generated body as one table cell: its lines (stripped) joined by ⏎."""
    return _code(" ⏎ ".join(line.strip() for line in code.strip().splitlines()))


def _variants_provenance(record: dict, path: str, machine: str) -> str:
    return _provenance({**record, "device": record["settings"]["device"], "machine": machine,
                        "date": _VARIANTS_COMMITTED}, path)


def _variants_counts(counts: dict) -> list:
    return [counts["written"], counts["dropped_as_held_out_answers"], counts["dropped_for_vocabulary"],
            counts["seen"] + counts["unseen"], counts["docstrings"], counts["unseen_docstrings"], counts["unseen"],
            counts["seen"], counts["train_pairs"]]


_COUNT_HEADER = ["variants written", "dropped: pass a held-out task", "dropped: a character outside the vocabulary",
                 "kept", "docstrings kept", "unseen docstrings", "unseen variants", "seen variants (trained on)",
                 "train pairs (46 x 3)"]


def _variant_misses(record: dict) -> tuple[list, list, list]:
    """The unseen variants written wrong, those of them that are the right code with other digits, and a table
    of the first six of each kind."""
    misses = [r for r in record["unseen_outputs"] if not r["exact"]]

    def shape(code: str) -> str:  # the code with every digit blanked out
        return re.sub(r"[0-9]", "#", code)
    number_only = [r for r in misses if shape(r["output"]) == shape(r["solution"])]
    others = [r for r in misses if r not in number_only]
    examples = ([["another number", _docstring(r["prompt"]), _program(r["solution"]), _program(r["output"])]
                 for r in number_only[:6]]
                + [["another kind", _docstring(r["prompt"]), _program(r["solution"]), _program(r["output"])]
                   for r in others[:6]])
    return misses, number_only, examples


def variants_cpu_section() -> str:
    record = _read(_VARIANTS_CPU)
    if record is None:
        return ""
    s, counts, exact, rate = record["settings"], record["counts"], record["exact"], record["pass_rate"]
    misses, number_only, examples = _variant_misses(record)
    from course_lib.tasks import load_tasks
    used = {c for t in load_tasks() if t.split == "train" for c in t.solution}
    missing = ", ".join(d for d in "0123456789" if d not in used)
    passed = set(record["passed"]["val"])
    val = [[task, _program(program), "yes" if task in passed else "no"]
           for task, program in sorted(record["val_outputs"].items())]
    return "\n\n".join([
        "## More examples of the same kind, on a CPU",
        "Pretrained on the 46 train pairs, chapter 4's GRU (its section 8) answers a held-out task with a nearby "
        "training task's program (`quintuple`, \"Return x multiplied by 5\", gets `return x * 3`). Would more "
        "data of the same kind teach it to read the docstring? `course_lib.gru.variants` writes that data. Its unit "
        "is a "
        "**template**: a sentence and code with the same blank, such as \"Return x multiplied by _.\" → "
        "`return x * _`. Filling the blanks with other numbers, conditions, words and argument names gives many "
        "docstrings; each is written under meaningless function names such as `f`, so only the docstring says "
        "what to write.",
        "- **The leak check.** Each variant runs against the tests of every val and test task with as many "
        "arguments (in the sandbox, renamed to the task's function name); one that passes all the tests of a "
        "held-out task is dropped (so is one whose text holds a held-out solution), and a check that does not finish "
        "is an error. Pieces of held-out programs can stay, as in the train tasks: `[x * 5 for x in xs]` passes no "
        "held-out task.\n"
        f"- **Unseen variants.** A share ({s['unseen_share']:.0%}) of the docstrings, with every function written "
        "under them, is never trained on: the model has met their template only with other values in the blank, if "
        "at all.\n"
        "- **How they are scored.** Greedy output against the variant's body, character for character; the course's "
        f"tasks against their tests. No action mask: variant bodies need characters the training solutions lack "
        f"(the digits {missing} among them).",
        "The variants, and the examples pretraining used (the train pairs three times each plus the seen variants):",
        _table(_COUNT_HEADER, [_variants_counts(counts)]),
        "The first eight variants dropped because they pass a held-out task's tests (the record keeps eight), by "
        "docstring:",
        _table(["docstring", "passes"], [[doc, ", ".join(ids)] for doc, ids in counts["dropped_examples"].items()]),
        "The run (chapter 4's GRU, other settings; one seed):",
        _table(["device", "seed", "threads", "embed_dim", "hidden_dim", "names per docstring", "epochs", "batch size",
                "lr", "updates", "seconds", "final loss"],
               [[s["device"], s["seed"], s["threads"], s["embed_dim"], s["hidden_dim"], s["copies"], s["epochs"],
                 s["batch_size"], s["lr"], record["updates"], f"{record['pretrain_seconds']:.0f}",
                 f"{record['final_loss']:.3f}"]]),
        _table(["seen variants: output = body", f"unseen variants ({counts['unseen']}): output = body",
                "train: greedy pass@1", "val (never trained on): greedy pass@1",
                "test (never trained on): greedy pass@1", "held-out tasks passed"],
               [[f"{exact['seen']:.1%}", f"{exact['unseen']:.1%}", f"{rate['train']:.3f}", f"{rate['val']:.3f}",
                 f"{rate['test']:.3f}", ", ".join(record["passed"]["val"] + record["passed"]["test"]) or "none"]]),
        f"Of the {len(record['unseen_outputs'])} unseen variants, {len(misses)} come out wrong; {len(number_only)} of "
        "those are the right code with other digits (\"another number\" below), the rest differ otherwise. The first "
        "six of each, in the record's order:",
        _table(["miss", "docstring", "body", "greedy output"], examples),
        "The greedy program for each val task:",
        _table(["val task", "greedy program", "passes"], val),
        _variants_provenance(record, _VARIANTS_CPU, "not recorded")])


def variants_gpu_section() -> str:
    records = {name: _read(f"notebooks/data/variants_gpu/{name}.json") for name in _VARIANTS_GPU}
    records = {name: r for name, r in records.items() if r is not None}
    if not records:
        return ""
    names = [name for name in _VARIANTS_GPU if name in records]
    rows = [[_VARIANTS_GPU[n], r["settings"]["seed"], r["settings"]["device"], r["settings"]["hidden_dim"],
             r["settings"]["extra_constants"], r["counts"]["examples"], r["settings"]["epochs"], r["updates"],
             f"{r['pretrain_seconds']:.0f}", f"{r['exact']['seen']:.1%}",
             f"{r['exact']['unseen']:.1%} of {r['counts']['unseen']}", f"{r['pass_rate']['train']:.3f}",
             f"{r['pass_rate']['val']:.3f}", f"{r['pass_rate']['test']:.3f}",
             ", ".join(r["passed"]["val"] + r["passed"]["test"]) or "none"]
            for n, r in ((n, records[n]) for n in names)]
    two_digit = [records[n] for n in names if n.startswith("two_digit")]
    summary = [[measure, len(two_digit), _pm([f(r) for r in two_digit])]
               for measure, f in (("unseen variants: output = body", lambda r: r["exact"]["unseen"]),
                                  ("train: greedy pass@1", lambda r: r["pass_rate"]["train"]),
                                  ("val (never trained on): greedy pass@1", lambda r: r["pass_rate"]["val"]),
                                  ("test (never trained on): greedy pass@1", lambda r: r["pass_rate"]["test"]))]
    tasks = sorted(next(iter(records.values()))["val_outputs"])
    programs = [[task] + [_program(records[n]["val_outputs"][task])
                          + (" (passes)" if task in records[n]["passed"]["val"] else "") for n in names]
                for task in tasks]
    machine = "not recorded (the script's docstring says one NVIDIA H100)"
    return "\n\n".join([
        "## More compute, and blanks drawn from more numbers, on a GPU",
        "The same script on a GPU, two ways. **Same data, 4x the updates**: the CPU run's settings with four times "
        "the epochs. **Two-digit blanks, hidden 512**: every number template also draws from 40 random two-digit "
        "constants (`--extra-constants 40`), so each template is seen with many more values; the GRU's memory is "
        "doubled (`hidden_dim` 512) and it makes more updates; three seeds (runs that differ only in their random "
        "draws, here also in the constants drawn). These runs change three things at once (data, memory, updates), "
        "so they do not say which one brings the difference. Seconds are the GPU's pretraining time.",
        _table(["run", "seed", "device", "hidden_dim", "extra constants", "examples", "epochs", "updates", "seconds",
                "seen variants: output = body", "unseen variants: output = body", "train: greedy pass@1",
                "val (never trained on): greedy pass@1", "test (never trained on): greedy pass@1",
                "held-out tasks passed"], rows),
        f"The two-digit runs over their {len(two_digit)} seeds (mean ± standard error):",
        _table(["measure", "seeds", "mean ± SE"], summary),
        "The greedy program for each val task, by run (seeds 0 and 1 of the two-digit runs are saved as "
        "`notebooks/checkpoints/variants_gpu/two_digit_seed0.pt` and `..._seed1.pt`, the copying start of "
        "[chapter 6's results](06_ppo_and_gae.md)):",
        _table(["val task"] + [f"{_VARIANTS_GPU[n]}, seed {records[n]['settings']['seed']}" for n in names], programs),
        "\n".join("- " + _variants_provenance(records[n], f"notebooks/data/variants_gpu/{n}.json", machine) for n in names)])


# Chapter 6: the GRU trained by PPO, on a CPU. Every pass rate below is a greedy pass@1 (one
# greedy program per task); the splits' roles are in each header (ROLES).

def _pm(values: list[float], digits: int = 3) -> str:
    """mean ± standard error of per-seed values (digits: 1 for lengths in tokens)."""
    from course_lib.stats import mean_se
    mean, se = mean_se(values)
    return f"{mean:.{digits}f} ± {se:.{digits}f}"


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


def _run_seconds(record: dict) -> tuple:
    """A `_variants_table` column: each variant's mean seconds per run."""
    return ("s per run (mean)", lambda v: f"{record['summary'][v]['run_seconds']['mean']:.0f}")


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
    runs = {f"seed{run['seed']}": run for run in record["runs"]}
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
        "(pretrained on a GPU by `benchmarks/variants_pretraining.py`; [chapter 4's results](04_gru_pretraining.md)). "
        "The start is the only change from "
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
        _provenance(record, path)])


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
        _provenance(b, path)])


def _ablation_section(path: str, title: str, intro: str, labels: dict, columns, pairs) -> str:
    """A Results-page section for one ablation record: its variants' table (with `columns`), the paired
    differences `pairs` ((label, variant, against), ...) and its provenance; "" when the record is absent.
    `columns` and `pairs` may be functions of the record."""
    record = _read(path)
    if record is None:
        return ""
    columns = columns(record) if callable(columns) else columns
    pairs = pairs(record) if callable(pairs) else pairs
    return "\n\n".join([title, intro, _variants_table(record, labels, columns), _paired_table(record, pairs),
                         _provenance(record, path)])


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

# Chapter 10: the tiny coder of chapter 9 under the same loop (benchmarks/llm_rl_benchmark.py), on a CPU.
# Every pass rate from samples is pass@1 from the record's n samples per task at its temperature.

_TINY = "notebooks/data/llm_rl_benchmark.json"
_TINY_METHODS = {"sft": "SFT (start)", "reinforce": "REINFORCE", "ppo": "PPO (value head, GAE)", "grpo": "GRPO"}
_TINY_SWEEP = {"sft": "SFT (start)", "grpo": "GRPO, lr 1e-3", "grpo-lr3e-3": "GRPO, lr 3e-3",
               "grpo-lr3e-3-min-std": "GRPO, lr 3e-3, floor 0.1 under the group's std"}


def _length_change(values: list[float], baseline: list[float]) -> list:
    """`_paired` for lengths: a change beyond the t-interval is "shorter" or "longer", not a gain or a loss."""
    change, interval, per_seed, verdict = _paired(values, baseline)
    words = {"a gain": "longer, beyond noise", "a loss": "shorter, beyond noise"}
    return [change.replace(".000 ±", " ±"), interval, per_seed, words.get(verdict, verdict)]


def _tiny_sweep_tables(seeds: list, values, sampled: str) -> tuple[str, str]:
    """The GRPO settings' means, and their differences paired by seed (values(method, key): one per seed)."""
    sweep = _table(["GRPO setting", "seeds", f"train: {sampled} (mean ± SE)", "avg length (tokens, mean ± SE)"],
                   [[label, len(seeds), _pm(values(m, "train_pass_rate")),
                     _pm(values(m, "avg_gen_len"), 1)]
                    for m, label in _TINY_SWEEP.items()])
    pairs = [("GRPO, lr 1e-3 − start", "grpo", "sft"), ("GRPO, lr 3e-3 − start", "grpo-lr3e-3", "sft"),
             ("floor − no floor, both at lr 3e-3", "grpo-lr3e-3-min-std", "grpo-lr3e-3"),
             ("GRPO, lr 3e-3 with the floor − start", "grpo-lr3e-3-min-std", "sft")]
    paired = _table(["difference, paired by seed", "measure", f"change ± SE ({len(seeds)} seeds)", "t-interval",
                     "per seed", "verdict"],
                    [[label, f"train: {sampled}"] + _paired(values(a, "train_pass_rate"), values(b, "train_pass_rate"))
                     for label, a, b in pairs]
                    + [[label, "avg length (tokens)"] + _length_change(values(a, "avg_gen_len"), values(b, "avg_gen_len"))
                       for label, a, b in pairs])
    return sweep, paired


def tiny_coder_section() -> str:
    record = _read(_TINY)
    if record is None:
        return ""
    config = record["config"]
    seeds, common, ev = config["seeds"], config["common"], config["eval"]
    runs = {(r["method"], r["seed"]): r for r in record["runs"]}
    sampled = _measure(ev["n_samples"], ev["temperature"])

    def values(method: str, key: str) -> list[float]:
        return [runs[(method, s)][key] for s in seeds]

    def per_step(method: dict) -> str:
        return f"{method['prompts_per_step']} prompts x {method['group_size']}"

    splits = ("train", "val", "test")
    means = _table(["model", "seeds"] + [f"{ROLES[s]}: {sampled}" for s in splits]
                   + ["train: greedy pass@1", "avg length of the samples (tokens)"],
                   [[label, len(seeds)] + [_pm(values(m, f"{s}_pass_rate")) for s in splits]
                    + [_pm(values(m, "train_greedy_pass@1")), _pm(values(m, "avg_gen_len"), 1)]
                    for m, label in _TINY_METHODS.items()])
    changes = _table(["method", "split", "measure", f"change ± SE ({len(seeds)} seeds)", "t-interval", "per seed",
                      "verdict"],
                     [[label, ROLES[s], sampled] + _paired(values(m, f"{s}_pass_rate"), values("sft", f"{s}_pass_rate"))
                      for m, label in list(_TINY_METHODS.items())[1:] for s in splits])
    variants = config["variants"]
    sweep, paired = _tiny_sweep_tables(seeds, values, sampled)
    grpo = [row for r in record["runs"] if r["method"] == "grpo" for row in r["curve"]]
    groups = len(grpo) * config["methods"]["grpo"]["prompts_per_step"]
    no_pass = groups - sum(row["groups_with_a_pass"] for row in grpo)
    fast = variants["grpo-lr3e-3"]
    return "\n\n".join([
        "## Chapter 9's tiny coder under the three methods, on a CPU",
        "The tiny coder of chapter 9, from its SFT adapter (merged) under a fresh LoRA (rank "
        f"{config['lora']['rank']}, alpha {config['lora']['alpha']}), trained by each method for {common['steps']} "
        f"steps (REINFORCE: {per_step(config['methods']['reinforce'])}; PPO: {per_step(config['methods']['ppo'])}; "
        f"GRPO: {per_step(config['methods']['grpo'])}, KL weight {config['methods']['grpo']['kl_coef']}), "
        f"learning rate {common['lr']}, rollouts at T = {common['temperature']} up to {common['max_new_tokens']} "
        f"tokens, reward 1 if every test passes minus {common['length_alpha']} x tokens / 100, the course's train "
        f"and val tasks as the rollout pool; seeds {seeds}. Every model, the start included (once per seed: the "
        f"seed moves only its sampling), is evaluated by {sampled}, up to {ev['max_new_tokens']} tokens, and by one "
        "greedy answer per task. The start passes train tasks it memorised and almost nothing else, so most "
        f"samples of a prompt fail alike: in the GRPO runs {no_pass} of {groups} groups had no passing sample.",
        means,
        "Each change against the start evaluated with the same seed; a change counts only beyond the t-interval:",
        changes,
        "### GRPO's learning rate, and a floor under the group's standard deviation",
        "GRPO's advantage divides by its group's standard deviation. In a group whose samples all fail, the "
        f"rewards differ only by the length penalty, a few thousandths, and the division blows those differences "
        "up to advantages of about ±1: the shortest failure is pushed as hard as a pass would be. `min_std` "
        "(`RLConfig(min_std=...)`) divides by at least that much. GRPO at the learning rate above, at "
        f"{fast['lr']} without a floor, and at {fast['lr']} with `min_std` = "
        f"{variants['grpo-lr3e-3-min-std']['min_std']}; everything else as above:",
        sweep,
        paired,
        _provenance(record, _TINY)])



PAGES = {
    "04_gru_pretraining": ("Chapter 4 results: pretraining on task variants",
                           "The records behind the side study of "
                           "[chapter 4](../../notebooks/04_gru_pretraining.ipynb): does pretraining on many variants "
                           "of the train tasks teach the GRU to read the docstring? Every rate is greedy (one greedy "
                           "output per variant or task).",
                           (variants_cpu_section, variants_gpu_section)),
    "06_ppo_and_gae": ("Chapter 6 results: PPO and GAE",
                       "The records behind [chapter 6](../../notebooks/06_ppo_and_gae.ipynb): the GRU trained by "
                       "PPO on a CPU. Every pass rate is a greedy pass@1 (one greedy program per task), "
                       "and every ± is a standard error over random seeds.",
                       (copying_start_section, ppo_benchmark_section, explore_section, lambda_section,
                        gru_methods_section)),
    "10_lora_rl": ("Chapter 10 results: LoRA-RL on a real model",
                   "The records behind [chapter 10](../../notebooks/10_lora_rl.ipynb).",
                   (engine_section, engine_candidates_section, cpu_seeds_section, start_sampled_section,
                    cpu_methods_section,
                    humaneval_protocol_section, humaneval_problems_section, course_humaneval_section,
                    gpu_long_section, gpu_seeds_section, gpu_seeds_fast_section, gpu_seeds_long_section,
                    section1_seeds_section,
                    gpu_engine_section,
                    tiny_coder_section)),
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
