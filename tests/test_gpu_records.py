"""The records made on a GPU, which the batch cannot remake, agree with themselves: the three-seed
GRPO record's summary is what its own per-seed rows give, its adapters are the LoRA it names, and
the GRU's GPU run ended normally on the device it names. The long run can stop after any step and go
on in a later session (a GPU that is yours for a few minutes at a time), as the run that never stopped."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import load_benchmark

from course_lib import stats

ROOT = Path(__file__).resolve().parents[1]
SEEDS_RECORD = ROOT / "notebooks" / "data" / "smollm2_gpu_seeds.json"
GRU_RECORD = ROOT / "notebooks" / "data" / "gru_ppo_cuda.json"


@pytest.fixture(scope="module")
def seeds_script():
    return load_benchmark("smollm2_gpu_seeds")


def test_the_three_seed_summary_is_what_its_per_seed_rows_give(seeds_script, tmp_path):
    """Split the record back into the per-seed records the runs wrote, merge them again with the
    script's own merge, and get the record back: its changes, means, SEs and verdicts included."""
    record = json.loads(SEEDS_RECORD.read_text())
    assert record["seeds"] == [0, 1, 2] and sorted(record["per_seed"]) == ["0", "1", "2"]
    shared = {key: record[key] for key in seeds_script.SHARED}
    for seed, own in record["per_seed"].items():
        (tmp_path / f"seed{seed}.json").write_text(json.dumps(
            {"script": record["runs_script"], **shared, "seed": int(seed), **own}))
    assert seeds_script.merge(tmp_path, tmp_path / "merged.json") == record
    assert set(record["changes"]) == set(seeds_script.MEASURES)
    for name, change in record["changes"].items():
        assert change["verdict"] == stats.seed_verdict(change["change"]), name


def test_seeds_that_name_their_code_merge_into_the_one_record_format(seeds_script, tmp_path):
    """Per-seed records written today (smollm2_gpu_long.py's header names the commit, its state and the threads)
    merge into a record that benchmarks/schema.py validates, with the first format's fields unchanged beside it;
    seeds of different commits are refused."""
    from benchmarks import schema

    record = json.loads(SEEDS_RECORD.read_text())
    shared = {key: record[key] for key in seeds_script.SHARED}
    code = {"code_revision": "0123456789abcdef0123456789abcdef01234567", "uncommitted_changes": False, "threads": 4}
    for seed, own in record["per_seed"].items():
        (tmp_path / f"seed{seed}.json").write_text(json.dumps(
            {"script": record["runs_script"], **shared, "seed": int(seed), **code, **own}))
    merged = seeds_script.merge(tmp_path, tmp_path / "merged.json", ["--merge", str(tmp_path)])
    assert schema.validate(merged) == []
    assert {key: merged[key] for key in record} == record  # what the chapter and the Results page read
    assert merged["code_revision"] == code["code_revision"] and merged["threads"] == 4  # the seeds', not the merge's
    assert [row["seed"] for row in merged["runs"]] == [0, 1, 2] and merged["summary"] == record["changes"]
    assert merged["seconds"] == max(own["wall_seconds"] for own in record["per_seed"].values())
    other = json.loads((tmp_path / "seed2.json").read_text())
    (tmp_path / "seed2.json").write_text(json.dumps({**other, "code_revision": "f" * 40}))
    with pytest.raises(SystemExit, match="different code"):
        seeds_script.merge(tmp_path, tmp_path / "merged.json")


def test_the_three_seed_record_is_a_full_run_on_a_gpu():
    record = json.loads(SEEDS_RECORD.read_text())
    assert record["device"].startswith("cuda") and "NVIDIA" in record["machine"]
    for seed in record["seeds"]:
        trained = next(r for r in record["per_seed"][str(seed)]["runs"] if r["model"] == "grpo-long")
        assert 0 < trained["steps_done"] == len(trained["curve"]) <= record["rl"]["steps"]
        assert trained["train_seconds"] >= record["train_seconds_budget"] or trained["steps_done"] == record["rl"]["steps"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_each_seeds_adapter_is_the_lora_the_record_names(seed):
    record = json.loads(SEEDS_RECORD.read_text())
    folder = ROOT / "notebooks" / "data" / "smollm2_gpu_seeds_adapters" / f"seed{seed}"
    config = json.loads((folder / "adapter_config.json").read_text())
    assert (config["r"], config["lora_alpha"]) == (record["lora"]["rank"], record["lora"]["alpha"])
    assert (folder / "adapter_model.safetensors").stat().st_size > 100_000


def test_the_grus_gpu_run_ended_normally_on_the_gpu():
    from course_lib.runs import file_sha256

    record = json.loads(GRU_RECORD.read_text())
    assert record["pretrained_sha256"] == file_sha256(ROOT / "notebooks" / "checkpoints" / "gru_pretrained.pt")
    assert [c["result"].split()[0] for c in record["commands"]] == ["rc=0"] * len(record["commands"])
    assert sum("--device cuda" in c["command"] for c in record["commands"]) == 4
    for name, result in record["eval"].items():
        assert result["device"].startswith("cuda: NVIDIA"), name
        assert len(record["curves"][name]) == result["updates"], name
    mixed, straight = record["curves"]["mixed (cuda, cpu, cuda)"], record["curves"]["cuda straight"]
    # the first two updates ran on the GPU in both runs: the same episodes, hence the same rewards
    assert [r["reward_mean"] for r in mixed[:2]] == [r["reward_mean"] for r in straight[:2]]


@pytest.mark.slow
def test_a_gpu_trained_adapter_passes_on_this_cpu_the_test_tasks_its_record_names():
    """The record is more than a claim: seed 0's adapter, trained on the GPU, loaded here on the CPU,
    passes exactly the `test` tasks (never trained on) that the record says it passed there (about 40 s)."""
    pytest.importorskip("gguf")
    import torch

    from course_lib.lm import evaluation, llm, model_zoo
    from course_lib.tasks import load_tasks

    record = json.loads(SEEDS_RECORD.read_text())
    tasks = [t for t in load_tasks() if t.split == "test"]
    trained = next(r for r in record["per_seed"]["0"]["runs"] if r["model"] == "grpo-long")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model, tokenizer = model_zoo.load_model(model_zoo.SMOLLM2, "cpu")
        model = llm.load_adapter(model, ROOT / "notebooks" / "data" / "smollm2_gpu_seeds_adapters" / "seed0")
        rows = evaluation.evaluate(model, tokenizer, tasks, n_samples=0, greedy=True, style="chat", seed=0,
                                   max_new_tokens=record["greedy"]["max_new_tokens"])["per_task"]
    finally:
        torch.set_num_threads(threads)
    passed_here = {r["id"] for r in rows if r["greedy_passed"]}
    assert passed_here == set(trained["greedy_passed_ids"]) & {t.id for t in tasks}
    assert len(passed_here) == trained["test_greedy_passed"] == 6


def _long_run(tmp_path, name: str, train_seconds: float) -> list[str]:
    """smollm2_gpu_long.py's smoke test on this CPU, resumable (--state), 2 steps at most."""
    import subprocess
    import sys

    cmd = [sys.executable, str(ROOT / "benchmarks" / "smollm2_gpu_long.py"), "--quick", "--device", "cpu",
           "--no-humaneval164", "--steps", "2", "--train-seconds", str(train_seconds),
           "--output", str(tmp_path / f"{name}.json"), "--state", str(tmp_path / f"{name}.pt")]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout.splitlines()


@pytest.mark.slow
def test_a_long_run_over_two_sessions_is_the_run_that_never_stopped(tmp_path):
    """The long run can stop after any step (--state) and go on in a later session. On this CPU, 1 step, a stop
    and 1 more step give the same steps (every number each step logs, the task order and the sampler's KL to
    the learner among them) and the same trained row as 2 steps at once; the stopped session writes no trained
    row, the resumed one measures no new start, and the record lists both sessions. (The smoke test's rewards
    are all 0, so its adapter does not move: that the trainer's state resumes the learning itself is
    tests/test_rl_core.py's resumed-run test.) About 90 s."""
    import torch

    pytest.importorskip("gguf")
    _long_run(tmp_path, "straight", 1000)
    first = _long_run(tmp_path, "resumed", 0.001)  # the budget is checked before each step: one step runs
    assert any("stopped at 1 of 2 steps" in line for line in first)
    partial = json.loads((tmp_path / "resumed.json").read_text())
    assert [r["model"] for r in partial["runs"]] == ["start"] and len(partial["partial_curve"]) == 1
    second = _long_run(tmp_path, "resumed", 0.001)
    assert any("1 of 2 steps done" in line for line in second) and not any("the start;" in line for line in second)

    straight, resumed = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("straight", "resumed"))
    assert [(s["steps_from"], s["steps_to"]) for s in resumed["sessions"]] == [(0, 1), (1, 2)]
    assert all(s["train_seconds"] > 0 and s["train_seconds_budget"] == 0.001 for s in resumed["sessions"])
    assert resumed["wall_seconds"] == round(sum(s["wall_seconds"] for s in resumed["sessions"]), 1)
    assert resumed["runs"][0] == partial["runs"][0]  # the start, measured once
    timing = ("seconds", "train_seconds", "eval_seconds")
    rows = [{k: v for k, v in run["runs"][1].items() if k not in timing and k != "curve"} for run in (straight, resumed)]
    assert rows[0] == rows[1] and rows[0]["steps_done"] == 2
    states = [torch.load(tmp_path / f"{n}.pt", weights_only=False) for n in ("straight", "resumed")]
    logged = [[{k: v for k, v in r.items() if k != "seconds"} for r in s["history"]] for s in states]
    assert logged[0] == logged[1] and "sampler_kl" in logged[0][1]
    assert all(torch.equal(states[0]["trainable"][n], states[1]["trainable"][n]) for n in states[0]["trainable"])


def test_a_long_run_continues_only_with_the_settings_it_started_with(tmp_path):
    import argparse

    script = load_benchmark("smollm2_gpu_long")
    args = argparse.Namespace(output=tmp_path / "run.json", state=tmp_path / "run.pt", seed=0, model=script.MODEL,
                              quick=False, steps=100, engine="auto", micro_batch_size=None)
    rl, greedy, sampled = script.settings(args)
    with pytest.raises(SystemExit, match="its record .* does not"):
        script.resumed_record(args, rl, greedy, sampled)
    started = {"seed": 0, "model": script.MODEL, "rl": rl, "greedy": greedy, "sampled": sampled, "lora": script.LORA,
               "quick": False, "runs": [{"model": "start"}]}
    args.output.write_text(json.dumps(started))
    assert script.resumed_record(args, rl, greedy, sampled)["runs"] == [{"model": "start"}]
    with pytest.raises(SystemExit, match="other settings: seed was 0, now 1"):
        script.resumed_record(argparse.Namespace(**{**vars(args), "seed": 1}), rl, greedy, sampled)
    with pytest.raises(SystemExit, match="other settings: rl.steps was 100, now 50"):
        script.resumed_record(args, {**rl, "steps": 50}, greedy, sampled)
    assert script.resumed_record(args, {**rl, "micro_batch_size": 8}, greedy, sampled)  # less memory, the same update
    args.output.write_text(json.dumps({**started, "runs": [{"model": "start"}, {"model": "grpo-long"}]}))
    with pytest.raises(SystemExit, match="finished already"):
        script.resumed_record(args, rl, greedy, sampled)


def test_seeds_merge_only_once_every_seed_has_done_its_steps(seeds_script, tmp_path):
    (tmp_path / "seed0.json").write_text(json.dumps({"runs": [{"model": "start"}, {"model": "grpo-long"}]}))
    (tmp_path / "seed1.json").write_text(json.dumps({"runs": [{"model": "start"}], "partial_curve": [{}] * 5}))
    assert seeds_script.unfinished_seeds(tmp_path, [0, 1, 2]) == {1: "steps recorded: 5", 2: "no record"}
