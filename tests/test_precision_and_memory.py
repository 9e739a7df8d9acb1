"""Half precision and running out of memory in the transformer's RL step (`llm_rl`, `llm --dtype`)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from course_lib.lm import llm, llm_rl, lm_policy
from course_lib import sandbox


def every_other_passes(jobs, **settings):
    """A stand-in for the sandbox: sample 0, 2, 4, ... pass (so every method has something to learn)."""
    return [SimpleNamespace(all_passed=i % 2 == 0, passed=int(i % 2 == 0), total=1, status="passed")
            for i in range(len(jobs))]


@pytest.mark.parametrize("method, group_size, micro_batch_size", [("grpo", 2, None), ("ppo", 1, 1)])
def test_the_rl_step_runs_in_bfloat16_on_the_cpu(monkeypatch, tasks, method, group_size, micro_batch_size):
    """Chapter 9's tiny coder (its SFT adapter merged) in bfloat16: two steps, all at once and in micro-batches.
    The frozen weights are bfloat16; the adapter, AdamW's moments, the value head and the log-probabilities
    the loss reads are float32; the adapter learns and the frozen weights stay as they were."""
    monkeypatch.setattr(sandbox, "run_tests_batch", every_other_passes)  # under sandbox.task_reports
    model, tokenizer = lm_policy.load_policy(llm.TINY, "cpu", init_adapter=llm.DEFAULT_SFT_DIR, seed=0,
                                             dtype="bfloat16")
    named = dict(model.named_parameters())
    frozen = {n: p.detach().clone() for n, p in named.items() if not p.requires_grad}
    lora = {n: p.detach().clone() for n, p in named.items() if p.requires_grad}
    assert {p.dtype for p in frozen.values()} == {torch.bfloat16} and {p.dtype for p in lora.values()} == {torch.float32}
    config = llm_rl.RLConfig(method=method, steps=2, prompts_per_step=4 // group_size, group_size=group_size,
                             max_new_tokens=12, micro_batch_size=micro_batch_size, seed=0)
    trainer = llm_rl.LMTrainer(model, tokenizer, [t for t in tasks if t.split == "train"], config)
    rows = [trainer.step() for _ in range(config.steps)]
    for row in rows:
        assert row["nonzero_advantages"] > 0 and row["pass_rate"] == 0.5
        assert all(torch.isfinite(torch.tensor(float(row[k]))) for k in ("loss", "policy_loss", "grad_norm"))
        assert row["grad_norm"] > 0
    assert all(s["exp_avg"].dtype == torch.float32 for s in trainer.optimizer.state.values())
    if method == "ppo":
        assert next(trainer.value_head.parameters()).dtype == torch.float32 and "value_loss" in rows[-1]
    ro, _ = trainer.collect()
    assert ro.logprobs.dtype == torch.float32 and torch.isfinite(ro.logprobs).all()
    named = dict(model.named_parameters())
    assert max((named[n] - p).abs().max().item() for n, p in lora.items()) > 0  # the adapter learned
    assert all(torch.equal(named[n], p) for n, p in frozen.items())  # the model itself did not


def test_the_command_trains_in_the_dtype_asked(small_dir, tmp_path):
    from course_lib.__main__ import main

    out = tmp_path / "run"
    assert main(["llm", "--method", "grpo", "--model-name", str(small_dir), "--init-adapter", "none",
                 "--dtype", "bfloat16", "--device", "cpu", "--out", str(out), "--steps", "1", "--batch-size", "2",
                 "--group-size", "2", "--max-new-tokens", "8", "--no-humaneval", "--no-progress"]) == 0
    report = json.loads((out / "eval.json").read_text())
    assert report["dtype"] == "bfloat16" and json.loads((out / "config.json").read_text())["dtype"] == "bfloat16"


# --- out of memory ---------------------------------------------------------------------------------------------

def test_out_of_memory_in_a_step_names_the_micro_batch_option_and_the_preset(small_dir, tmp_path, monkeypatch,
                                                                              capsys):
    """A step that runs out of memory (here the second, made to) ends with what to change, and the first,
    saved, is continued by --resume with a smaller --micro-batch-size."""
    from course_lib.__main__ import main

    step = llm_rl.LMTrainer.step
    calls = []

    def second_step_runs_out(self):
        calls.append(1)
        if len(calls) == 2:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (a stand-in)")
        return step(self)

    monkeypatch.setattr(llm_rl.LMTrainer, "step", second_step_runs_out)
    out = tmp_path / "run"
    command = ["llm", "--method", "grpo", "--model-name", str(small_dir), "--init-adapter", "none", "--device", "cpu",
               "--out", str(out), "--steps", "2", "--batch-size", "2", "--group-size", "2", "--max-new-tokens", "8",
               "--no-humaneval", "--no-progress"]
    assert main(command) == 2
    message = capsys.readouterr().out
    for words in ("out of memory in an RL step (cpu, float32): 4 completions", "all at once",
                  "--micro-batch-size 2", "--preset deepseek-coder-1.3b sets --micro-batch-size 4",
                  "1 finished step(s) are saved", "--resume", "OutOfMemoryError: CUDA out of memory"):
        assert words in message, message
    monkeypatch.setattr(llm_rl.LMTrainer, "step", step)
    assert main(command + ["--resume", "--micro-batch-size", "2"]) == 0  # continues from the saved step
    assert [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2]


@pytest.mark.parametrize("error, explained", [
    (RuntimeError("CUDA error: out of memory"), True),
    (RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: you tried to "
                  "allocate 123 bytes"), True),
    (MemoryError(), True),
    (RuntimeError("mat1 and mat2 shapes cannot be multiplied"), False),
])
def test_only_out_of_memory_errors_are_explained(error, explained):
    from course_lib.cli import llm_cli

    args = SimpleNamespace(preset="deepseek-coder-1.3b", device="cpu", dtype="auto", batch_size=8)
    with pytest.raises(MemoryError if explained else RuntimeError) as caught:
        with llm_cli.explained_out_of_memory(lambda: llm_cli.sft_out_of_memory(args)):
            raise error
    if explained:
        assert "smaller --batch-size (e.g. 4); the preset deepseek-coder-1.3b sets --batch-size 8" in str(caught.value)
    else:
        assert caught.value is error
