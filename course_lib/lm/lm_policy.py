"""The transformer as a policy of the RL core (chapters 10-11): load it, score what it wrote.

    load_policy      the starting model (chapter 9's SFT adapter merged) under a fresh LoRA adapter: the
                     adapter disabled is the frozen reference, for free
    token_logprobs   log p(token | the tokens before it) of a batch of prompt + completion rows
    id_batch         a rollout's prompts followed by the ids the model sampled, as one padded batch
    LMActor          what `course_lib.core.rl.learn` asks of a policy: score(ro, rows) and reference_logprobs,
                     rows of similar length scored together
    value_head_for   PPO's critic on a transformer: last hidden state -> V(s_t)

Chapter 6's GRU is the other policy of the same core (`course_lib.gru.actor.GRUActor`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import torch

from course_lib.core.rollout import Rollout
from course_lib.corpus import IGNORE_INDEX
from course_lib.lm import llama, llm, model_zoo
from course_lib.lm.llm import _to

LEARNER_DTYPES = ("float32", "bfloat16")  # the learner's arithmetic (`LMActor`)

# -----------------------------------------------------------------------------
# loading: the starting policy and its frozen reference in one model

def load_policy(model_name: str = "tiny", device: str | None = None, *, init_adapter=None, rank: int = 8,
                alpha: float = 16.0, targets: Sequence[str] | None = None, seed: int = 0, dtype=None):
    """(model, tokenizer): the base, with init_adapter merged into its weights, under a fresh LoRA.

    The fresh adapter starts at B = 0, so the policy starts as base + init_adapter, and
    `with model.disable_adapter():` gives exactly that starting policy: the reference.
    init_adapter: a folder written by `llm.save_adapter` (chapter 9 saves the tiny coder's
    SFT adapter in notebooks/checkpoints/tiny_coder_sft), or None to start from the base.
    device, dtype: as for `model_zoo.load_model` (dtype None or "auto": float32 on a CPU; on a GPU bfloat16, or
    float16 where the GPU lacks bfloat16 arithmetic). The fresh adapter is float32 whatever the base's dtype.
    """
    model, tokenizer = model_zoo.load_model(model_name, device, dtype=dtype)
    if init_adapter is not None:
        if not (Path(init_adapter) / "adapter_config.json").exists():
            raise FileNotFoundError(f"{init_adapter} holds no adapter (no adapter_config.json); pass a folder "
                                    "written by llm.save_adapter, e.g. notebooks/checkpoints/tiny_coder_sft")
        model = llm.load_adapter(model, init_adapter).merge_and_unload()
    model = llm.add_lora(model, rank=rank, alpha=alpha, targets=targets or llama.LORA_TARGETS, seed=seed)
    return model, tokenizer


# -----------------------------------------------------------------------------
# log-probabilities of what was written: the language model as the RL core sees it

def token_logprobs(model, batch: dict, temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """log p(token_t | tokens_<t) at every position after the first, and the mask of scored ones.

    batch comes from `llm.sft_batch` (prompt masked) or `id_batch`: the mask is 1 on the
    completion, 0 on the prompt and the padding. Shapes [B, T-1]. temperature: the
    policy that sampled the rollouts is softmax(logits / T), so its log-probabilities are those.
    """
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                   position_ids=batch.get("position_ids")).logits[:, :-1]
    logits = logits.float() / temperature
    targets = batch["input_ids"][:, 1:]
    logprobs = torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    mask = (batch["labels"][:, 1:] != IGNORE_INDEX).float()
    return logprobs * mask, mask


def id_batch(ro: Rollout, rows: torch.Tensor, pad_id: int) -> tuple[dict, int, int]:
    """The rows' prompts (left-padded to width P) followed by their sampled ids (width T): (batch, P, T).

    Every row's generated token t then sits at position P + t, predicted by the logits at
    P - 1 + t. position_ids count from each row's first real token, as in generation.
    """
    prompts = [ro.prompts[i] for i in ro.prompt_index[rows].tolist()]
    T = max(1, int(ro.mask[rows].sum(1).max()))
    P = max(len(p) for p in prompts)
    input_ids = torch.full((len(prompts), P + T), pad_id, dtype=torch.long)
    attention_mask = torch.zeros_like(input_ids)
    for r, ids in enumerate(prompts):
        input_ids[r, P - len(ids):P] = torch.tensor(ids)
        attention_mask[r, P - len(ids):P] = 1
    input_ids[:, P:] = ro.actions[rows, :T]
    attention_mask[:, P:] = ro.mask[rows, :T].long()
    labels = torch.full_like(input_ids, IGNORE_INDEX)
    labels[:, P:] = torch.where(attention_mask[:, P:].bool(), input_ids[:, P:], IGNORE_INDEX)
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    return ({"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels,
             "position_ids": position_ids}, P, T)


class LMActor:
    """A causal language model as the RL core sees it (`course_lib.core.update.Policy`): it scores the ids it sampled.

    value_head: a linear map from the last hidden state to V(s_t) (PPO's critic), or None.
    The reference policy is the same model with its LoRA adapter disabled.
    score_tokens: on a CPU, the most tokens (rows x padded width) scored in one pass. Rows are sorted by
    length and scored in chunks of similar rows, so little of each pass is padding: a rollout's
    completions run from a few tokens to max_new_tokens, and one pass over all of them pads every row to
    the longest, in the transformer and in the vocabulary-wide log-softmax. The log-probabilities and
    gradients are the same as one pass's, up to float32 rounding; None scores all rows in one pass (as a
    GPU always does). dtype: "float32", or "bfloat16" to run the passes under torch.autocast (faster where
    the processor has bfloat16 arithmetic, coarser log-probabilities).
    """

    def __init__(self, model, tokenizer, temperature: float, value_head: torch.nn.Module | None = None, *,
                 score_tokens: int | None = 1024, dtype: str = "float32"):
        if dtype not in LEARNER_DTYPES:
            raise ValueError(f"unknown learner dtype {dtype!r}; choose one of {LEARNER_DTYPES}")
        if score_tokens is not None and score_tokens < 1:
            raise ValueError(f"score_tokens must be at least 1 (or None: one pass), got {score_tokens}")
        self.model, self.temperature, self.value_head = model, temperature, value_head
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.score_tokens = score_tokens if model.device.type == "cpu" else None
        self.dtype = dtype

    def _score_rows(self, ro: Rollout, rows: torch.Tensor, with_values: bool):
        batch, P, T = id_batch(ro, rows, self.pad_id)
        batch = _to(batch, self.model.device)
        # One pass over known ids: no KV cache to build, and the vocabulary's logits only where they are
        # read (the T + 1 last positions, P - 1 onwards), not over the whole prompt.
        with torch.autocast(self.model.device.type, dtype=torch.bfloat16, enabled=self.dtype == "bfloat16"):
            out = self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                             position_ids=batch["position_ids"], output_hidden_states=with_values,
                             use_cache=False, logits_to_keep=T + 1)
        logits = out.logits[:, :T].float() / self.temperature  # the logits before each of the T ids
        mask = ro.mask[rows, :T].to(logits.device)
        logprobs = torch.log_softmax(logits, -1).gather(-1, batch["input_ids"][:, P:, None]).squeeze(-1) * mask
        values = None
        if with_values:  # V(s_t) reads the state before token t: the hidden state at P - 1 + t
            values = self.value_head(out.hidden_states[-1][:, P - 1:P - 1 + T].float()).squeeze(-1) * mask
        return logprobs.cpu(), values.cpu() if values is not None else None

    def _score(self, ro: Rollout, rows: torch.Tensor, with_values: bool):
        chunks = length_chunks(ro, rows, self.score_tokens)
        if len(chunks) == 1:
            return self._score_rows(ro, rows, with_values)
        T = max(1, int(ro.mask[rows].sum(1).max()))
        scored = [self._score_rows(ro, rows[c], with_values) for c in chunks]  # each as wide as its longest row
        back = torch.empty(len(rows), dtype=torch.long)
        back[torch.cat(chunks)] = torch.arange(len(rows))  # the chunks' rows back in the order asked for

        def joined(parts):
            return torch.cat([torch.nn.functional.pad(x, (0, T - x.shape[1])) for x in parts])[back]
        return joined([lp for lp, _ in scored]), joined([v for _, v in scored]) if with_values else None

    def score(self, ro: Rollout, rows: torch.Tensor):
        logprobs, values = self._score(ro, rows, self.value_head is not None)
        return logprobs, None, values

    @torch.no_grad()
    def reference_logprobs(self, ro: Rollout, rows: torch.Tensor) -> torch.Tensor:
        with self.model.disable_adapter():  # the reference: the starting policy, frozen
            return self._score(ro, rows, False)[0]


def length_chunks(ro: Rollout, rows: torch.Tensor, max_tokens: int | None) -> list[torch.Tensor]:
    """Positions in rows, sorted by prompt + completion length and cut into chunks whose padded size
    (rows x (longest prompt + longest completion)) stays within max_tokens; a longer row is a chunk of its own.
    None: one chunk of every row, in order."""
    if max_tokens is None:
        return [torch.arange(len(rows))]
    prompt = torch.tensor([len(ro.prompts[i]) for i in ro.prompt_index[rows].tolist()])
    completion = ro.mask[rows].sum(1).long()
    chunks, chunk, P, T = [], [], 0, 0
    for i in torch.argsort(prompt + completion, stable=True).tolist():
        p, t = max(P, int(prompt[i])), max(T, int(completion[i]))
        if chunk and (len(chunk) + 1) * (p + t) > max_tokens:
            chunks.append(torch.tensor(chunk))
            chunk, p, t = [], int(prompt[i]), int(completion[i])
        chunk.append(i)
        P, T = p, t
    chunks.append(torch.tensor(chunk))
    return chunks


def value_head_for(model) -> torch.nn.Linear:
    """PPO's critic on a language model: hidden state -> V, starting at V = 0 everywhere (float32)."""
    head = torch.nn.Linear(model.config.hidden_size, 1).to(model.device)
    torch.nn.init.zeros_(head.weight)
    torch.nn.init.zeros_(head.bias)
    return head
