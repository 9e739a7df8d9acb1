"""The `llm` command's presets (`course_lib.lm.presets`): the real model by default, every setting by one name."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from course_lib.lm import llm, presets
from course_lib.cli import llm_cli

ROOT = Path(__file__).resolve().parents[1]


def every_other_passes(jobs, **settings):
    """A stand-in for the sandbox: programs 0, 2, 4, ... pass."""
    return [SimpleNamespace(all_passed=i % 2 == 0, passed=int(i % 2 == 0), total=1, fraction=float(i % 2 == 0),
                            status="passed")
            for i in range(len(jobs))]


def parse(*words) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    llm_cli.add_arguments(parser)
    return parser.parse_args(list(words))


def resolved(*words) -> argparse.Namespace:
    args = parse(*words)
    llm_cli.apply_preset(args)
    return args


@pytest.mark.parametrize("method, record", [("grpo", "smollm2_rl.json"), ("ppo", "smollm2_ppo.json"),
                                            ("reinforce", "smollm2_reinforce.json")])
def test_with_no_model_the_command_trains_smollm2_by_chapter_10s_cpu_recipe(method, record):
    """`llm --method grpo` alone: SmolLM2-135M-Instruct with the settings of the records chapter 10 reads."""
    made = json.loads((ROOT / "notebooks" / "data" / record).read_text())
    args = resolved("--method", method, "--no-progress")
    assert args.preset == presets.DEFAULT_PRESET and args.model_name == made["model"]
    config = llm_cli.config_from_args(args)
    assert {key: getattr(config, key) for key in made["rl"] if key != "kl_coef"} == \
        {key: value for key, value in made["rl"].items() if key != "kl_coef"}
    # the KL weight each record ran with: grpo's kl_coef; reinforce and ppo ran without a KL term, whatever it said
    assert config.kl_weight == (made["rl"]["kl_coef"] if method == "grpo" else 0.0)
    assert (args.rank, args.alpha) == (made["lora"]["rank"], made["lora"]["alpha"])
    assert llm_cli.resolve_init_adapter(args.init_adapter, args.model_name) is None  # from the model itself
    assert args.out == str(Path("runs") / presets.DEFAULT_PRESET / method)
    # the same update in a quarter of the memory (how_to_run's "Memory"); the same settings otherwise
    assert config.micro_batch_size == 4


def test_the_tiny_coder_stays_available_by_name_with_the_commands_own_defaults(tmp_path):
    args = resolved("--method", "grpo", "--model-name", llm.TINY, "--out", str(tmp_path))
    assert args.preset is None and (args.batch_size, args.max_new_tokens, args.init_adapter) == (8, 128, "auto")
    config = llm_cli.config_from_args(args)
    assert (config.style, config.steps, config.group_size, config.micro_batch_size) == ("completion", 20, 4, None)
    with pytest.raises(ValueError, match="--out is required"):
        resolved("--method", "grpo", "--model-name", llm.TINY)


def test_options_given_override_the_preset():
    args = resolved("--method", "grpo", "--steps", "2", "--batch-size", "3", "--micro-batch-size", "none",
                    "--style", "completion", "--out", "elsewhere", "--init-adapter", "auto", "--no-progress")
    config = llm_cli.config_from_args(args)
    assert (config.steps, config.prompts_per_step, config.micro_batch_size, config.style) == (2, 3, None, "completion")
    assert (config.group_size, config.length_alpha) == (4, 0.0)  # not given: the preset's
    assert (args.out, args.init_adapter) == ("elsewhere", "auto")


# --- DeepSeek-Coder by one name; the dtype from the device -------------------------------------------------------

def as_if_a_gpu(monkeypatch, bfloat16: bool) -> None:
    """This machine seen as one with a GPU: an A100 or H100 (bfloat16 arithmetic) or a T4 (bfloat16 emulated)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: bfloat16 or including_emulation)


def test_the_dtype_is_chosen_from_the_device(monkeypatch):
    import torch

    from course_lib.config import ConfigError, resolve_dtype

    assert resolve_dtype("auto", "cpu") == resolve_dtype(None, "cpu") == torch.float32
    assert resolve_dtype("bfloat16", "cpu") == torch.bfloat16 and resolve_dtype(torch.float16, "cpu") == torch.float16
    with pytest.raises(ConfigError, match="choose one of auto, float32, float16, bfloat16"):
        resolve_dtype("half", "cpu")
    as_if_a_gpu(monkeypatch, bfloat16=True)
    assert resolve_dtype("auto", "cuda") == torch.bfloat16
    as_if_a_gpu(monkeypatch, bfloat16=False)  # a T4 emulates bfloat16: float16, which it computes in
    assert resolve_dtype("auto", "cuda") == torch.float16 and resolve_dtype("float32", "cuda") == torch.float32
    with pytest.raises(SystemExit):
        parse("--dtype", "half")


def test_the_deepseek_preset_sets_every_knob_of_a_gpu_run():
    name = "deepseek-coder-1.3b"
    sft = resolved("--preset", name, "--method", "sft")
    assert (sft.model_name, sft.device, sft.dtype) == ("deepseek-ai/deepseek-coder-1.3b-base", "cuda", "auto")
    assert (sft.steps, sft.batch_size, sft.max_new_tokens) == (100, 8, 256)
    assert sft.out == str(Path("runs") / name / "sft")
    for method, prompts, group in (("grpo", 8, 4), ("ppo", 8, 1), ("reinforce", 8, 1)):
        args = resolved("--preset", name, "--method", method)
        config = llm_cli.config_from_args(args)
        assert (config.steps, config.prompts_per_step, config.group_size) == (20, prompts, group)
        assert (config.max_new_tokens, config.micro_batch_size, config.style, config.length_alpha) == \
            (256, 4, "completion", 0.01)
        assert args.out == str(Path("runs") / name / method)
        # RL starts from the adapter the SFT run writes
        assert llm_cli.resolve_init_adapter(args.init_adapter, args.model_name) == str(Path(sft.out) / "adapter")
    # given options win, the device among them
    args = resolved("--preset", name, "--method", "grpo", "--device", "cpu", "--dtype", "bfloat16",
                    "--max-new-tokens", "64")
    assert (args.device, args.dtype, args.max_new_tokens) == ("cpu", "bfloat16", 64)


def test_a_preset_in_a_notebook_is_a_function_that_returns_its_settings(monkeypatch, tmp_path):
    from course_lib.config import ConfigError

    name = "deepseek-coder-1.3b"
    with pytest.raises(ConfigError, match="pass --device cpu"):  # this machine has no GPU: said, not guessed
        presets.preset_settings(name)
    as_if_a_gpu(monkeypatch, bfloat16=False)
    settings = presets.preset_settings(name, "grpo", runs_dir=tmp_path)
    assert (settings["device"], settings["dtype"]) == ("cuda", "float16")
    assert settings["init_adapter"] == str(tmp_path / name / "sft" / "adapter")
    assert settings["out"] == str(tmp_path / name / "grpo")
    assert presets.preset_settings(name, "sft", device="cpu")["dtype"] == "float32"
    assert presets.preset_settings(name)["init_adapter"] == str(llm.REPO_ROOT / "runs" / name / "sft" / "adapter")
    as_if_a_gpu(monkeypatch, bfloat16=True)
    chapter = presets.chapter10_parameters(name)
    assert chapter["dtype"] == "bfloat16" and chapter["rollout_max_new_tokens"] == chapter["max_new_tokens"] == 256
    assert (chapter["rl_steps"], chapter["completions_per_step"], chapter["group_size"]) == (20, 32, 4)
    assert presets.chapter10_parameters(presets.DEFAULT_PRESET, "cpu")["init_adapter"] == ""  # from the model itself
    with pytest.raises(ValueError, match="unknown preset 'deepseek'; choose one of"):
        presets.preset_settings("deepseek")


def test_rl_of_a_preset_before_its_sft_says_which_command_to_run_first(small_dir, tmp_path, monkeypatch, capsys):
    from course_lib.__main__ import main

    monkeypatch.chdir(tmp_path)
    code = main(["llm", "--preset", "deepseek-coder-1.3b", "--method", "grpo", "--model-name", str(small_dir),
                 "--device", "cpu", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 2 and "--preset deepseek-coder-1.3b --method sft` first" in out, out
    assert not (tmp_path / "runs" / "deepseek-coder-1.3b" / "grpo").exists()  # refused before making anything


def test_the_deepseek_presets_sequence_runs_end_to_end_with_a_small_model_standing_in(small_dir, tmp_path,
                                                                                        monkeypatch):
    """SFT, then GRPO and PPO, each one command with the preset and the same few options (a small model for
    DeepSeek-Coder, the CPU, two steps, short completions): each adapter lands where the next command, and
    chapter 10 through `presets.preset_settings`, reads it. The sandbox's verdicts are stood in for (every
    other program passes), to keep the three evaluations of 836 programs each quick; the command-line tests
    of tests/test_llm.py and tests/test_llm_rl.py run the real one."""
    from course_lib.lm import model_zoo
    from course_lib import sandbox
    from course_lib.__main__ import main

    monkeypatch.setattr(sandbox, "run_tests_batch", every_other_passes)  # under sandbox.task_reports
    monkeypatch.chdir(tmp_path)  # the commands write runs/ under the directory they run in
    name = "deepseek-coder-1.3b"
    small = ["--preset", name, "--model-name", str(small_dir), "--device", "cpu", "--steps", "2", "--batch-size", "2",
             "--max-new-tokens", "8", "--no-humaneval", "--no-progress"]
    assert main(["llm", "--method", "sft", *small]) == 0
    sft_adapter = tmp_path / "runs" / name / "sft" / "adapter"
    assert (sft_adapter / "adapter_config.json").exists()
    for method, group_size in (("grpo", 4), ("ppo", 1)):
        assert main(["llm", "--method", method, *small]) == 0
        run = tmp_path / "runs" / name / method
        report = json.loads((run / "eval.json").read_text())
        assert report["init_adapter"] == str(Path("runs") / name / "sft" / "adapter")  # the SFT run's
        assert (report["preset"], report["dtype"], report["model_name"]) == (name, "float32", str(small_dir))
        config = report["rl_config"]
        assert (config["method"], config["steps"], config["prompts_per_step"], config["max_new_tokens"]) == \
            (method, 2, 2, 8)  # the options given
        assert (config["group_size"], config["micro_batch_size"], config["length_alpha"]) == (group_size, 4, 0.01)
        assert [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()] == [1, 2]
        # the RL adapter sits on the SFT model: it loads onto the base with the SFT adapter merged in
        base, _ = model_zoo.load_model(str(small_dir), "cpu")
        llm.load_adapter(llm.load_adapter(base, sft_adapter).merge_and_unload(), run / "adapter")
        # where a notebook looks for this run's start and its output
        settings = presets.preset_settings(name, method, device="cpu", runs_dir=tmp_path / "runs")
        assert Path(settings["init_adapter"]) == sft_adapter and Path(settings["out"]) == run
