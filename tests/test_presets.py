"""The `llm` command's presets (`course_lib.presets`): the real model by default, every setting by one name."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from course_lib import llm, llm_cli, presets

ROOT = Path(__file__).resolve().parents[1]


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
    assert {key: getattr(config, key) for key in made["rl"]} == made["rl"]
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
