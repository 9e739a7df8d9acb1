"""Honest evaluation of a code model: the generation protocol, pass@1 and pass@k (chapters 9-11).

The protocol, the same in training, evaluation and every chapter:

1. PROMPT      `protocol.prompt_for`: the task as the model is asked it (`course_lib.lm.protocol`).
2. GENERATE    `generate`: greedy (temperature 0) or sampled, until <eos>, a stop
               sequence, or max_new_tokens.
3. EXTRACT     `protocol.extract_completion` / `protocol.answer_code`: the code the sandbox runs.
4. RUN         prompt + completion, then each test, in the sandbox (never in this process).

The measures (greedy pass@1, pass@1 from n samples at temperature T, pass@k) and their keys are
`course_lib.scoring`'s, the same for both policies: `evaluate` writes the completions and
`scoring.score` runs and scores them. Average length: generated tokens per completion, up to <eos>
or the stop (what a length penalty counts).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence

import torch

from course_lib.lm.llm import encode_prompt, load_adapter
from course_lib.lm.model_zoo import load_model
from course_lib.lm.protocol import STOP_SEQUENCES, answer_code, extract_completion, prompt_for, stop_sequences_for
from course_lib.progress import tqdm
from course_lib.sandbox import task_reports
from course_lib.scoring import score
from course_lib.tasks import load_humaneval, load_tasks


# -----------------------------------------------------------------------------
# generate

@dataclass(frozen=True)
class Generation:
    prompt_index: int   # which prompt it answers
    text: str           # what the model wrote (special tokens dropped), up to <eos>
    completion: str     # extract_completion(text): what the sandbox runs after the prompt
    n_tokens: int       # tokens generated before <eos>, or until the stop or the limit
    finish: str         # "eos", "stop" (a stop sequence) or "length" (max_new_tokens)
    ids: tuple = ()     # the ids sampled, <eos> included when it ended the text: what RL scores
    logprobs: tuple = ()  # the sampler's log-probability of each id (fast engines; () for "hf")


def _stopping_criteria(tokenizer, width: int, stop_sequences: Sequence[str]):
    from transformers import StoppingCriteria, StoppingCriteriaList

    class StopOnSequences(StoppingCriteria):
        """Row i is finished once its generated text holds a stop sequence."""

        def __call__(self, input_ids, scores, **kwargs):
            texts = tokenizer.batch_decode(input_ids[:, width:], skip_special_tokens=True)
            return torch.tensor([any(s in t for s in stop_sequences) for t in texts], device=input_ids.device)

    return StoppingCriteriaList([StopOnSequences()] if stop_sequences else [])


def pick_engine(model, engine: str | None, temperature: float) -> str:
    """The engine a call samples with: `decode.ENGINES`, or None for the default.

    The default: sampling runs the fast engine (`course_lib.lm.decode`) on a Llama-family model, on a
    CPU or a GPU, where RL spends its time (benchmarks/generation_throughput.py and
    benchmarks/smollm2_gpu_engines.py measure both engines); greedy decoding runs Hugging Face's
    `generate`, so the book's greedy pass@1 is one engine's number everywhere.
    """
    from course_lib.lm.decode import ENGINES, is_llama

    if engine is None:
        return "fast" if temperature > 0 and is_llama(model) else "hf"
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; choose one of {ENGINES}")
    if engine != "hf" and not is_llama(model):
        raise ValueError(f"engine {engine!r} runs Llama-family models only; this is {type(model).__name__}: "
                         "use engine='hf'")
    return engine


@torch.no_grad()
def generate(model, tokenizer, prompts: Sequence[str], *, n_samples: int = 1, temperature: float = 0.0,
             max_new_tokens: int = 128, stop_sequences: Sequence[str] = STOP_SEQUENCES, seed: int = 0,
             batch_size: int = 64, progress: bool = False, engine: str | None = None) -> list[Generation]:
    """n_samples generations per prompt (prompt-major order), greedy when temperature == 0.

    Sampling draws from the model's full distribution at this temperature (no top-k,
    no top-p), seeded with seed: the same call gives the same text. engine: "hf" (Hugging
    Face's `generate`), "fast" or "fast-bf16" (`course_lib.lm.decode`), None: `pick_engine`'s default.
    """
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 is greedy), got {temperature}")
    sample = temperature > 0
    n = n_samples if sample else 1
    limit = getattr(model.config, "max_position_embeddings", None)
    encoded = [encode_prompt(tokenizer, p) for p in prompts]
    if limit is not None:
        too_long = [i for i, ids in enumerate(encoded) if len(ids) + max_new_tokens > limit]
        if too_long:
            raise ValueError(f"prompt {too_long[0]} has {len(encoded[too_long[0]])} tokens; with max_new_tokens="
                             f"{max_new_tokens} it exceeds the model's {limit} positions")
    engine = pick_engine(model, engine, temperature)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    rows = [(i, ids) for i, ids in enumerate(encoded) for _ in range(n)]
    was_training = model.training
    model.eval()
    if engine == "hf":
        write = _hf_writer(model, tokenizer, temperature, max_new_tokens, stop_sequences, pad, seed)
    else:
        write = _fast_writer(model, tokenizer, temperature, max_new_tokens, stop_sequences, seed,
                             "bfloat16" if engine == "fast-bf16" else "float32")
    out: list[Generation] = []
    chunks = range(0, len(rows), batch_size)
    for start in tqdm(chunks, desc="generating", disable=not progress, unit="batch"):
        chunk = rows[start:start + batch_size]
        for (i, _), (new, finish, logprobs) in zip(chunk, write([ids for _, ids in chunk])):
            end = len(new) - (finish == "eos")
            text = tokenizer.decode(new[:end], skip_special_tokens=True)
            out.append(Generation(i, text, extract_completion(text, stop_sequences), end, finish, tuple(new),
                                  tuple(logprobs)))
    model.train(was_training)
    return out


def _hf_writer(model, tokenizer, temperature, max_new_tokens, stop_sequences, pad, seed):
    """Rows of prompt ids -> (ids written, finish, ()) for each, by Hugging Face's `generate` (torch's global RNG)."""
    from transformers import GenerationConfig

    from course_lib.lm.decode import left_padded

    sample = temperature > 0
    config = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=sample, num_beams=1,
                              pad_token_id=pad, eos_token_id=tokenizer.eos_token_id,
                              **({"temperature": temperature, "top_k": 0, "top_p": 1.0} if sample else {}))
    torch.manual_seed(seed)

    def write(chunk):
        input_ids, attention_mask = left_padded(chunk, pad)
        width = input_ids.shape[1]
        generated = model.generate(input_ids=input_ids.to(model.device), attention_mask=attention_mask.to(model.device),
                                   generation_config=config,
                                   stopping_criteria=_stopping_criteria(tokenizer, width, stop_sequences))
        for new in generated[:, width:].tolist():
            end = next((j for j, t in enumerate(new) if t in (tokenizer.eos_token_id, pad)), len(new))
            text = tokenizer.decode(new[:end], skip_special_tokens=True)
            finish = ("eos" if end < len(new) and new[end] == tokenizer.eos_token_id
                      else "stop" if any(s in text for s in stop_sequences) else "length")
            yield (new[:end + 1] if finish == "eos" else new[:end]), finish, ()

    return write


def _fast_writer(model, tokenizer, temperature, max_new_tokens, stop_sequences, seed, precision):
    """The same for `course_lib.lm.decode.sample`: one weight snapshot per call, its own seeded generator."""
    from course_lib.lm import decode

    snapshot = decode.Snapshot(model, precision)
    generator = torch.Generator(device=snapshot.device).manual_seed(seed)  # where the engine draws its tokens
    text_of = lambda ids: tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731

    def write(chunk):
        for w in decode.sample(model, chunk, temperature=temperature, max_new_tokens=max_new_tokens,
                               eos_id=tokenizer.eos_token_id, decode=text_of, stop_sequences=stop_sequences,
                               generator=generator, snapshot=snapshot):
            yield list(w.ids), w.finish, w.logprobs

    return write


# -----------------------------------------------------------------------------
# run and score

def run_completions(tasks, completions: Sequence[str], *, timeout: float = 2.0) -> list[bool]:
    """Whether task.program(completion) passes all of the task's tests, in the sandbox."""
    return [bool(r.all_passed) for r in task_reports(tasks, completions, timeout=timeout)]


def evaluate(model, tokenizer, tasks, *, n_samples: int = 10, temperature: float = 0.8, greedy: bool = True,
             ks: Sequence[int] = (1, 5, 10), max_new_tokens: int = 128, style: str = "completion", seed: int = 0,
             timeout: float = 2.0, batch_size: int = 64, progress: bool = False) -> dict:
    """Greedy pass@1 and, from n_samples samples per task at temperature, pass@1 and pass@k, per split and
    near/far: the completions written here, scored by `course_lib.scoring.score` (its keys).

    style: "completion", "instruct" or "chat" (`prompt_for`; the sandbox runs `answer_code`).

    Keys: `score`'s ("{group}_greedy_pass@1", "{group}_pass@1", "{group}_pass@{k}", "{group}_tasks",
    "n_samples", "temperature", "per_task") plus "style", "max_new_tokens", "greedy_avg_gen_len" and
    "avg_gen_len" (sampled) in tokens; each per_task row adds greedy_tokens and greedy_finish.
    """
    tasks = list(tasks)
    prompts = [prompt_for(t, style, tokenizer) for t in tasks]
    stops = stop_sequences_for(style)
    common = dict(max_new_tokens=max_new_tokens, stop_sequences=stops, batch_size=batch_size, progress=progress)
    result: dict = {"style": style, "max_new_tokens": max_new_tokens}
    greedy_gens, greedy_codes, samples = [], None, None
    if greedy:
        greedy_gens = generate(model, tokenizer, prompts, temperature=0.0, seed=seed, **common)
        greedy_codes = [answer_code(t, g.text, style) for t, g in zip(tasks, greedy_gens)]
        result["greedy_avg_gen_len"] = round(sum(g.n_tokens for g in greedy_gens) / len(greedy_gens), 2)
    if n_samples:
        gens = generate(model, tokenizer, prompts, n_samples=n_samples, temperature=temperature, seed=seed, **common)
        samples = [answer_code(tasks[g.prompt_index], g.text, style) for g in gens]
        result["avg_gen_len"] = round(sum(g.n_tokens for g in gens) / len(gens), 2)
    result.update(score(tasks, greedy=greedy_codes, samples=samples, temperature=temperature, ks=ks,
                        timeout=timeout))
    for row, g in zip(result["per_task"], greedy_gens):
        row.update(greedy_tokens=g.n_tokens, greedy_finish=g.finish)
    return result


# -----------------------------------------------------------------------------
# a model by name: `python -m course_lib eval --model NAME`

def evaluate_model(model_name: str, *, adapter=None, tasks=None, style: str | None = None,
                   max_new_tokens: int = 256, humaneval: bool = False, device: str | None = None,
                   batch_size: int = 32, progress: bool = False, n_samples: int = 0, temperature: float = 0.8,
                   seed: int = 0) -> dict:
    """`python -m course_lib eval --model NAME`: greedy pass@1 of a transformer per split, and with
    n_samples > 0 pass@1 from n_samples samples at temperature, and pass@k.

    tasks: Tasks (default: the course's train, val and test); adapter: a LoRA folder written by
    `llm` to put on the model first; style: "chat" for a model with a chat template, else
    "completion" (the default picks by the tokenizer); humaneval: also the 164 HumanEval problems
    (its `train` and `test` splits). Returns evaluate's keys plus the model's name and size.
    """
    if n_samples < 0 or temperature <= 0:  # before the model loads
        raise ValueError(f"samples must be >= 0 and temperature > 0, got {n_samples} and {temperature}")
    model, tokenizer = load_model(model_name, device, pretrain_if_missing=False)
    parameters = sum(p.numel() for p in model.parameters())
    if adapter is not None:
        model = load_adapter(model, adapter)
    style = style or ("chat" if getattr(tokenizer, "chat_template", None) else "completion")
    common = dict(style=style, max_new_tokens=max_new_tokens, batch_size=batch_size, progress=progress,
                  n_samples=n_samples, temperature=temperature, seed=seed)
    result = evaluate(model, tokenizer, load_tasks() if tasks is None else tasks, **common)
    if humaneval:
        result["humaneval"] = evaluate(model, tokenizer, load_humaneval(), **common)
    result.update(model_name=model_name, adapter=str(adapter) if adapter else None, parameters=parameters,
                  device=str(model.device), machine=f"{model.device.type}, {os.cpu_count()} CPU cores")
    return result
