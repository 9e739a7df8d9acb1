"""The records made on a GPU, which the batch cannot remake, agree with themselves: the three-seed
GRPO record's summary is what its own per-seed rows give, its adapters are the LoRA it names, and
the GRU's GPU run ended normally on the device it names."""

from __future__ import annotations

import json
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
