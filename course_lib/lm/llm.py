"""Transformers, LoRA and supervised fine-tuning: the LLM foundation (chapter 9).

The models of chapters 9-11 are all `LlamaForCausalLM`s: the tiny coder this module pretrains
from scratch (`pretrain_tiny_coder`, about a million parameters), SmolLM2-135M-Instruct and
DeepSeek-Coder-1.3B. They load by name (`course_lib.lm.model_zoo.load_model`), generate with the
same `generate`, take the same LoRA adapter and save it the same way: only the size differs. The
architecture and its parameter counts are in `course_lib.lm.llama`. The tiny coder's tokenizer is a
byte-level BPE trained with the `tokenizers` library (`course_lib.tokenizers.train_hf_bpe`) and
wrapped as a transformers `PreTrainedTokenizerFast`, like DeepSeek-Coder's own.

Data rules (the course's splits): the tiny coder is pretrained on short functions
from Python's standard library plus the `train` tasks' prompt + solution pairs
(`course_lib.corpus.pretraining_texts`); SFT uses the `train` pairs only
(`course_lib.corpus.task_examples`, which refuses other splits). No `val` or
`test` solution enters either: `course_lib.corpus.drop_leaks` filters them and
a test checks the actual data with `find_leaks`.

One sequence is  <bos> prompt completion <eos>, with the prompt and the completion
tokenized separately (so the ids at the seam are the ones generation sees). SFT
scores only the completion and <eos>: prompt positions get the label -100, which
the loss skips (the teacher-guided GRPO README's lesson; `sft_batch(mask_prompt=False)` is the wrong way,
kept for the chapter to show).
"""

from __future__ import annotations

import contextlib
import json
import random
import time
import warnings
from pathlib import Path
from typing import Sequence

import torch

from course_lib.core.schedules import warmup_cosine
from course_lib.corpus import Example, IGNORE_INDEX, batches, drop_leaks, find_leaks, pretraining_texts, task_examples
from course_lib.lm.llama import LORA_TARGETS, TINY_ARCHITECTURE, parameter_count, tiny_coder_config
from course_lib.progress import tqdm
from course_lib.tasks import load_tasks
from course_lib.tokenizers import BOS, EOS, PAD, train_hf_bpe

TINY = "tiny"
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TINY_DIR = REPO_ROOT / "notebooks" / "checkpoints" / "tiny_coder"
DEFAULT_SFT_DIR = DEFAULT_TINY_DIR.parent / "tiny_coder_sft"  # chapter 9's SFT adapter, chapter 10's start
PRETRAINING_FILE = "pretraining.json"  # what the tiny coder was trained on, how long it took, its curves


# -----------------------------------------------------------------------------
# the tiny coder's data and tokenizer

def pretraining_examples(tasks=None, *, max_body_chars: int = 400, methods: bool = True,
                         train_repeats: int = 4) -> list[Example]:
    """Standard-library functions (methods too, bodies up to max_body_chars) + the train pairs.

    The chapter-4 "broad" regime with more of the standard library, since a transformer
    wants more text than a GRU; held-out solutions are dropped by `drop_leaks` inside.
    """
    return pretraining_texts("broad", tasks=tasks, train_repeats=train_repeats,
                             max_body_chars=max_body_chars, methods=methods)


def sft_examples(tasks) -> list[Example]:
    """The SFT data: prompt -> solution of the train tasks (other splits raise), with no held-out solution."""
    return drop_leaks(task_examples(tasks), tasks)


def train_tiny_tokenizer(texts: Sequence[str], vocab_size: int = TINY_ARCHITECTURE["vocab_size"]):
    """A byte-level BPE (`course_lib.tokenizers.train_hf_bpe`) wrapped as a transformers tokenizer."""
    from transformers import PreTrainedTokenizerFast


    tokenizer = PreTrainedTokenizerFast(tokenizer_object=train_hf_bpe(texts, vocab_size),
                                        bos_token=BOS, eos_token=EOS, pad_token=PAD)
    tokenizer.model_max_length = TINY_ARCHITECTURE["max_position_embeddings"]
    return tokenizer


# -----------------------------------------------------------------------------
# sequences and batches

def encode_prompt(tokenizer, prompt: str) -> list[int]:
    """<bos> + the prompt's ids: what the model reads before writing (training and generation alike).

    A prompt that already starts with <bos> (a chat template writes it) gets no second one.
    """
    has_bos = tokenizer.bos_token_id is not None and not prompt.startswith(tokenizer.bos_token or "\0")
    bos = [tokenizer.bos_token_id] if has_bos else []
    return bos + tokenizer(prompt, add_special_tokens=False)["input_ids"]


def encode_example(tokenizer, prompt: str, completion: str) -> tuple[list[int], int]:
    """(ids of <bos> prompt completion <eos>, number of prompt ids including <bos>)."""
    prompt_ids = encode_prompt(tokenizer, prompt)
    completion_ids = tokenizer(completion, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return prompt_ids + completion_ids, len(prompt_ids)


def sft_batch(tokenizer, examples: Sequence[Example], *, mask_prompt: bool = True) -> dict:
    """input_ids, attention_mask and labels [B, T] for a causal LM; rows right-padded.

    labels = input_ids, except -100 (IGNORE_INDEX, skipped by the loss) at padding and,
    when mask_prompt, at every prompt position: the model is scored only on what it
    must write, the completion and <eos>. The model shifts labels by one itself.
    """
    rows = [encode_example(tokenizer, e.prompt, e.target) for e in examples]
    width = max(len(ids) for ids, _ in rows)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    input_ids = torch.full((len(rows), width), pad, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
    labels = torch.full((len(rows), width), IGNORE_INDEX, dtype=torch.long)
    for i, (ids, n_prompt) in enumerate(rows):
        input_ids[i, :len(ids)] = torch.tensor(ids)
        attention_mask[i, :len(ids)] = 1
        start = n_prompt if mask_prompt else 0
        labels[i, start:len(ids)] = torch.tensor(ids[start:])
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def _to(batch: dict, device) -> dict:
    return {k: v.to(device) for k, v in batch.items()}


# -----------------------------------------------------------------------------
# training: one loop for pretraining (everything scored) and SFT (the completion only)

def train_causal_lm(model, tokenizer, examples: Sequence[Example], *, steps: int, batch_size: int, lr: float,
                    seed: int, mask_prompt: bool = True, warmup_steps: int | None = None,
                    clip_norm: float = 1.0, progress: bool = True, desc: str = "training",
                    eval_every: int = 0, eval_fn=None) -> list[dict]:
    """AdamW on the parameters that require grad (all of them, or only LoRA's); returns one dict per step.

    Batches are shuffled epochs of similar-length examples (`course_lib.corpus.batches`);
    the learning rate warms up linearly, then decays along a cosine to lr/10
    (`course_lib.core.schedules.warmup_cosine`). eval_fn(model) -> dict is called every eval_every
    steps and after the last; its numbers join that step's dict.
    """
    if steps < 1 or batch_size < 1:
        raise ValueError(f"steps and batch_size must be at least 1, got {steps} and {batch_size}")
    torch.manual_seed(seed)
    rng = random.Random(seed)
    warmup = max(1, steps // 10) if warmup_steps is None else warmup_steps
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: warmup_cosine(s, steps, warmup))
    plan: list = []
    history = []
    model.train()
    for step in tqdm(range(1, steps + 1), desc=desc, disable=not progress, unit="step"):
        if not plan:
            plan = batches(examples, batch_size, rng)
        batch = sft_batch(tokenizer, plan.pop(), mask_prompt=mask_prompt)
        loss = model(**_to(batch, model.device)).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, clip_norm)
        optimizer.step()
        row = {"step": step, "loss": loss.item(), "lr": schedule.get_last_lr()[0],
               "scored_tokens": int((batch["labels"][:, 1:] != IGNORE_INDEX).sum())}
        schedule.step()
        if eval_fn is not None and (step == steps or (eval_every and step % eval_every == 0)):
            row.update(eval_fn(model))
            model.train()
        history.append(row)
    model.eval()
    return history


@torch.no_grad()
def completion_loss(model, tokenizer, examples: Sequence[Example], batch_size: int = 32) -> float:
    """Teacher-forced loss on the completion tokens and <eos> only (nats per token), prompts given."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(examples), batch_size):
        batch = sft_batch(tokenizer, examples[i:i + batch_size], mask_prompt=True)
        n = int((batch["labels"][:, 1:] != IGNORE_INDEX).sum())
        total += model(**_to(batch, model.device)).loss.item() * n
        count += n
    model.train(was_training)
    return total / count


# -----------------------------------------------------------------------------
# the tiny coder: build, pretrain, save, load

def build_tiny_coder(vocab_size: int, seed: int = 0, **architecture):
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(tiny_coder_config(vocab_size=vocab_size, **architecture)).eval()


def pretrain_tiny_coder(out_dir=None, *, steps: int = 300, batch_size: int = 16, lr: float = 3e-3,
                        seed: int = 0, vocab_size: int = TINY_ARCHITECTURE["vocab_size"],
                        architecture: dict | None = None, tasks=None, examples: Sequence[Example] | None = None,
                        tokenizer=None, eval_every: int = 25, progress: bool = True):
    """Tokenizer + LlamaForCausalLM trained from scratch on `pretraining_examples`; saved to out_dir if given.

    Every token is scored (a language model learns to write prompts too). Every
    eval_every steps the completion loss of the train and val solutions is measured
    (val: measured, never trained on). Returns (model, tokenizer, info); info has the
    curves, the data counts and the wall time, and is saved (all but the time) as pretraining.json.
    examples and tokenizer default to `pretraining_examples(tasks)` and a tokenizer trained on them.
    """
    tasks = load_tasks() if tasks is None else list(tasks)
    examples = pretraining_examples(tasks) if examples is None else list(examples)
    leaks = find_leaks(examples, tasks)
    if leaks:
        raise ValueError(f"pretraining data holds val/test solutions (example, task): {leaks[:3]}")
    if tokenizer is None:
        tokenizer = train_tiny_tokenizer([e.prompt + e.target for e in examples], vocab_size)
    model = build_tiny_coder(len(tokenizer), seed=seed, **(architecture or {}))
    train_pairs = task_examples([t for t in tasks if t.split == "train"])
    val_pairs = [Example(t.prompt, t.solution, f"val:{t.id}") for t in tasks if t.split == "val"]

    def measure(m):
        return {"train_solution_loss": completion_loss(m, tokenizer, train_pairs),
                "val_solution_loss": completion_loss(m, tokenizer, val_pairs)}

    start = time.perf_counter()
    history = train_causal_lm(model, tokenizer, examples, steps=steps, batch_size=batch_size, lr=lr, seed=seed,
                              mask_prompt=False, progress=progress, desc="pretraining",
                              eval_every=eval_every, eval_fn=measure)
    seconds = time.perf_counter() - start
    info = {"steps": steps, "batch_size": batch_size, "lr": lr, "seed": seed, "seconds": round(seconds, 1),
            "parameters": parameter_count(model.config), "vocab_size": len(tokenizer),
            "examples": len(examples), "stdlib_examples": sum(e.source.startswith("stdlib:") for e in examples),
            "train_examples": sum(e.source.startswith("train:") for e in examples),
            "tokens_per_epoch": sum(len(encode_example(tokenizer, e.prompt, e.target)[0]) for e in examples),
            "history": history}
    if out_dir is not None:
        save_model(model, tokenizer, out_dir, info)
    return model, tokenizer, info


def save_model(model, tokenizer, out_dir, info: dict | None = None) -> Path:
    """save_pretrained for both (config.json, model.safetensors, tokenizer.json, ...), plus pretraining.json."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    if info is not None:  # without the wall time, so re-running the batch rewrites the folder byte for byte
        saved = {k: v for k, v in info.items() if k != "seconds"}
        (out / PRETRAINING_FILE).write_text(json.dumps(saved, indent=1) + "\n")
    return out


def tiny_start_files(model_dir=DEFAULT_TINY_DIR, adapter_dir=DEFAULT_SFT_DIR) -> list[Path]:
    """The weight files an RL run of the tiny coder starts from: chapter 9's model and its SFT adapter.
    A record of such runs carries their SHA-256 (checkpoints.file_sha256), so a chapter can tell whether
    the record was made from the files it loads (checkpoints.check_record_made_from)."""
    return [Path(model_dir) / "model.safetensors", Path(adapter_dir) / "adapter_model.safetensors"]


# -----------------------------------------------------------------------------
# LoRA with peft

def add_lora(model, rank: int = 8, alpha: float = 16.0, dropout: float = 0.0,
             targets: Sequence[str] = LORA_TARGETS, seed: int | None = None):
    """Wrap model with LoRA adapters on the target projections; only the adapters train.

    Each target W (frozen) becomes W + (alpha / rank) * B A, with A random and B zero,
    so the wrapped model starts out computing exactly what the base model computes.
    seed fixes A's random start (otherwise it comes from torch's global generator).
    """
    from peft import LoraConfig, get_peft_model

    if seed is not None:
        torch.manual_seed(seed)

    config = LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=dropout, target_modules=list(targets),
                        bias="none", task_type="CAUSAL_LM")
    with _quiet_peft():
        return get_peft_model(model, config)


def save_adapter(model, out_dir) -> Path:
    """Only the adapter: adapter_config.json + adapter_model.safetensors (kilobytes, not the base model)."""
    out = Path(out_dir)
    for config in model.peft_config.values():  # a base inside the course is named relative to it: same on every machine
        base = Path(config.base_model_name_or_path or "")
        if base.is_absolute() and base.is_relative_to(REPO_ROOT):
            config.base_model_name_or_path = str(base.relative_to(REPO_ROOT))
    model.save_pretrained(out)
    (out / "README.md").unlink(missing_ok=True)  # peft's empty model-card template, naming this machine's paths
    return out


def load_adapter(base_model, adapter_dir, trainable: bool = False):
    """The base model with a saved adapter put back on (the base must be the one it was trained on)."""
    from peft import PeftModel

    with _quiet_peft():
        return PeftModel.from_pretrained(base_model, str(adapter_dir), is_trainable=trainable)


@contextlib.contextmanager
def _quiet_peft():
    """peft asks transformers 5 a deprecated question (is_gradient_checkpointing); not the reader's concern."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        yield


def sft(model, tokenizer, examples: Sequence[Example], *, steps: int, batch_size: int = 8, lr: float = 2e-3,
        seed: int = 0, mask_prompt: bool = True, progress: bool = True, eval_every: int = 0,
        eval_fn=None) -> list[dict]:
    """Supervised fine-tuning: `train_causal_lm` on prompt -> solution pairs, prompt masked by default."""
    return train_causal_lm(model, tokenizer, examples, steps=steps, batch_size=batch_size, lr=lr, seed=seed,
                           mask_prompt=mask_prompt, progress=progress, desc="SFT" if mask_prompt else "SFT (unmasked)",
                           eval_every=eval_every, eval_fn=eval_fn)
