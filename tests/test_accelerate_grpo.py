"""GRPO under `accelerate launch` with two CPU processes (gloo): it runs, and the adapters stay identical."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "accelerate_grpo.py"
SFT_ADAPTER = REPO / "notebooks" / "checkpoints" / "tiny_coder_sft" / "adapter_config.json"


def accelerate_cli() -> str | None:
    here = Path(sys.executable).parent / "accelerate"
    return str(here) if here.exists() else shutil.which("accelerate")


@pytest.mark.skipif(accelerate_cli() is None, reason="the accelerate command is not installed")
@pytest.mark.skipif(not SFT_ADAPTER.exists(), reason="the tiny coder's SFT adapter (chapter 9) is not there")
@pytest.mark.slow
@pytest.mark.parametrize("method", ["grpo", "teacher-grpo"])
def test_two_cpu_processes_train_one_adapter(tmp_path, method):
    out = tmp_path / "run"
    command = [accelerate_cli(), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
               "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0",
               str(SCRIPT), "--cpu", "--method", method, "--steps", "2", "--batch-size", "2",
               "--group-size", "2", "--max-new-tokens", "24", "--out", str(out)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    run = json.loads((out / "run.json").read_text())
    assert run["processes"] == 2 and run["backend"] == "gloo" and "MULTI_CPU" in run["distributed_type"]
    assert run["prompts_per_step_all"] == 4
    # the gradients were averaged over the processes: both hold the same adapter at the end
    assert run["adapter_spread"] < 1e-6, run["adapter_spread"]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and all("reward_all" in r for r in rows)
    assert (out / "adapter" / "adapter_config.json").exists()
    if method == "teacher-grpo":
        assert all("teacher_sft_loss" in r for r in rows)
