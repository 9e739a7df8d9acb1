"""Chapter 10's Results page, the CPU records: the rollout engines, the CPU recipe over seeds, the three
methods on SmolLM2, and chapter 9's tiny coder under RL."""

from __future__ import annotations

from pathlib import Path

from book_tools.results.common import (CPU_SPLITS, ROLES, change_row, md_table, mean_pm, paired_change, read_record,
    record_provenance, sampled_measure)


def engine_section() -> str:
    path = "notebooks/data/generation_throughput.json"
    record = read_record(path)
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
        md_table(["CPU capability", "setting"] + [f"{e} tokens/s" for e in engines]
               + [f"{e} / hf" for e in engines[1:]], rows),
        "One GRPO step of the CPU recipe's settings (4 x 4, 2 epochs, KL 0.05) from the start, in seconds, by part, "
        "its speed-up over the step as it ran before the fast engine, and the step's logged KL(sampler || learner) "
        "per token (estimated on the sampled tokens, so it can come out slightly negative). *before*: Hugging "
        "Face's `generate`, and the learner scoring all 16 rows in one padded pass; *one pass* / *chunked*: the "
        "learner scores all rows at once, or rows of similar length together (`score_tokens`, the default); "
        "*bf16 learner*: the learner's passes under bfloat16 autocast (`learner_dtype`). The learn part is the "
        "reference's pass and two epochs of forward and backward passes. Each setup was timed twice, alternating "
        "with the others, and the faster try is shown:",
        md_table(["CPU capability", "setup", "step", "generate", "sandbox", "score (log pi_old)", "learn",
                "speed-up", "sampler KL"], steps),
        "KL per token between each sampler's next-token distribution and the learner's, on the same prefixes "
        "(mean / max). int8 weights with one scale per activation matrix (fbgemm) were a candidate; this KL "
        "rules them out:",
        md_table(["CPU capability"] + samplers, kl),
        record_provenance(record, path)])


def engine_candidates_section() -> str:
    """Other rollout engines on the same CPU rollout: speed, what a new policy costs each, and the KL to the learner."""
    path = "notebooks/data/engine_candidates.json"
    record = read_record(path)
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
        md_table(["engine", "weights", "useful tokens/s", "/ hf", "new weights, s per step", "KL to the learner"], rows),
        f"The matrix products of one 16-row decode step alone run at {bound['float32']['gflop_per_s']} GFLOP/s in "
        f"float32 and {bound['bfloat16']['gflop_per_s']} in bfloat16 here: no float32 engine built on these kernels "
        f"can pass {bound['float32']['tokens_per_s']:.0f} useful tokens/s "
        f"({bound['float32']['tokens_per_s'] / hf:.1f}x `generate`), and a bfloat16 one "
        f"{bound['bfloat16']['tokens_per_s']:.0f}, before attention, sampling and rows that end early.",
        record_provenance(record, path)])


def cpu_seeds_section() -> str:
    path = "notebooks/data/smollm2_cpu_seeds.json"
    record = read_record(path)
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
        md_table(["tasks (all never trained on)", "measure", "start", "trained", "change", "t-interval", "verdict"],
               rows),
        record_provenance(record, path)])


def _paired_rows(record: dict, label: str) -> list[list]:
    """Rows of one record of start + trained seeds: each measure's start, trained mean ± SE, paired change, verdict."""
    start = next(r for r in record["runs"] if r["model"] == "start")
    trained = sorted((r for r in record["runs"] if r["model"] != "start"), key=lambda r: r["seed"])
    sampled = sampled_measure(record["sampled"]["n_samples"], record["sampled"]["temperature"])
    return [[label, len(trained), ROLES[split], sampled if kind else "greedy pass@1", f"{start[key]:.3f}"]
            + change_row([r[key] for r in trained], start[key]) for split, key, kind in CPU_SPLITS]


def start_sampled_section() -> str:
    path = "notebooks/data/smollm2_start_sampled.json"
    record = read_record(path)
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
        f"for it: {sampled_measure(n, temperature)} over all {n_he} HumanEval problems is {he_all:.3f}.",
        md_table(["tasks", "count", "greedy pass@1", sampled_measure(n, temperature), f"pass@{n} from {n} samples"], rows),
        record_provenance(record, path)])


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
    loaded = [(label, path, read_record(path)) for label, path in records]
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
        md_table(["method", "seeds", "split", "measure", "start", "trained (mean ± SE)", "change ± SE", "t-interval",
                "verdict"], rows)]
    by_label = {label: record for label, _, record in loaded}
    if "GRPO" in by_label and "GRPO in TRL's GRPOTrainer" in by_label:
        course = {r["seed"]: r for r in by_label["GRPO"]["runs"] if r["model"] != "start"}
        trl = {r["seed"]: r for r in by_label["GRPO in TRL's GRPOTrainer"]["runs"] if r["model"] != "start"}
        seeds = sorted(set(course) & set(trl))
        sampled = sampled_measure(by_label["GRPO"]["sampled"]["n_samples"], by_label["GRPO"]["sampled"]["temperature"])
        diff = [[ROLES[split], sampled if kind else "greedy pass@1", len(seeds)]
                + paired_change([trl[s][key] for s in seeds], [course[s][key] for s in seeds])
                for split, key, kind in CPU_SPLITS]
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
            md_table(["split", "measure", "seeds", "TRL − course, change ± SE", "t-interval", "per seed", "verdict"],
                   diff)]
    parts.append("\n".join("- " + record_provenance(record, path) for _, path, record in loaded))
    return "\n\n".join(parts)


_TINY = "notebooks/data/llm_rl_benchmark.json"


_TINY_METHODS = {"sft": "SFT (start)", "reinforce": "REINFORCE", "ppo": "PPO (value head, GAE)", "grpo": "GRPO"}


_TINY_SWEEP = {"sft": "SFT (start)", "grpo": "GRPO, lr 1e-3", "grpo-lr3e-3": "GRPO, lr 3e-3",
               "grpo-lr3e-3-min-std": "GRPO, lr 3e-3, floor 0.1 under the group's std"}


def _length_change(values: list[float], baseline: list[float]) -> list:
    """`paired_change` for lengths: a change beyond the t-interval is "shorter" or "longer", not a gain or a loss."""
    change, interval, per_seed, verdict = paired_change(values, baseline)
    words = {"a gain": "longer, beyond noise", "a loss": "shorter, beyond noise"}
    return [change.replace(".000 ±", " ±"), interval, per_seed, words.get(verdict, verdict)]


def _tiny_sweep_tables(seeds: list, values, sampled: str) -> tuple[str, str]:
    """The GRPO settings' means, and their differences paired by seed (values(method, key): one per seed)."""
    sweep = md_table(["GRPO setting", "seeds", f"train: {sampled} (mean ± SE)", "avg length (tokens, mean ± SE)"],
                   [[label, len(seeds), mean_pm(values(m, "train_pass_rate")),
                     mean_pm(values(m, "avg_gen_len"), 1)]
                    for m, label in _TINY_SWEEP.items()])
    pairs = [("GRPO, lr 1e-3 − start", "grpo", "sft"), ("GRPO, lr 3e-3 − start", "grpo-lr3e-3", "sft"),
             ("floor − no floor, both at lr 3e-3", "grpo-lr3e-3-min-std", "grpo-lr3e-3"),
             ("GRPO, lr 3e-3 with the floor − start", "grpo-lr3e-3-min-std", "sft")]
    paired = md_table(["difference, paired by seed", "measure", f"change ± SE ({len(seeds)} seeds)", "t-interval",
                     "per seed", "verdict"],
                    [[label, f"train: {sampled}"] + paired_change(values(a, "train_pass_rate"), values(b, "train_pass_rate"))
                     for label, a, b in pairs]
                    + [[label, "avg length (tokens)"] + _length_change(values(a, "avg_gen_len"), values(b, "avg_gen_len"))
                       for label, a, b in pairs])
    return sweep, paired


def tiny_coder_section() -> str:
    record = read_record(_TINY)
    if record is None:
        return ""
    config = record["config"]
    seeds, common, ev = config["seeds"], config["common"], config["eval"]
    runs = {(r["method"], r["seed"]): r for r in record["runs"]}
    sampled = sampled_measure(ev["n_samples"], ev["temperature"])

    def values(method: str, key: str) -> list[float]:
        return [runs[(method, s)][key] for s in seeds]

    def per_step(method: dict) -> str:
        return f"{method['prompts_per_step']} prompts x {method['group_size']}"

    splits = ("train", "val", "test")
    means = md_table(["model", "seeds"] + [f"{ROLES[s]}: {sampled}" for s in splits]
                   + ["train: greedy pass@1", "avg length of the samples (tokens)"],
                   [[label, len(seeds)] + [mean_pm(values(m, f"{s}_pass_rate")) for s in splits]
                    + [mean_pm(values(m, "train_greedy_pass@1")), mean_pm(values(m, "avg_gen_len"), 1)]
                    for m, label in _TINY_METHODS.items()])
    changes = md_table(["method", "split", "measure", f"change ± SE ({len(seeds)} seeds)", "t-interval", "per seed",
                      "verdict"],
                     [[label, ROLES[s], sampled] + paired_change(values(m, f"{s}_pass_rate"), values("sft", f"{s}_pass_rate"))
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
        record_provenance(record, _TINY)])
