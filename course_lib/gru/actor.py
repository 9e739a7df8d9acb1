"""The GRU as a policy the RL core can train (chapters 5-8): sampling episodes and re-reading them.

    collect_rollout    samples B episodes in lockstep and scores them with ONE sandbox batch: a Rollout
    evaluate_actions   re-reads a Rollout's tokens with the current weights: log pi(a_t), entropy, V(s_t)
    GRUActor           the GRU as the RL core (`course_lib.core.rl`) sees it: score(ro, rows) and its reference
"""

from __future__ import annotations

import numpy as np
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from course_lib.core.rollout import Rollout, distinct_texts, last_token_rewards, minibatch
from course_lib.gru.batched_env import BatchedCodeGen
from course_lib.gru.models import decode
from course_lib.rewards import fraction_passed


def masked_logits(logits: torch.Tensor, allowed: torch.Tensor, temperature: float) -> torch.Tensor:
    """The rollout policy's logits: ids outside the action mask get -inf, then divided by T."""
    return logits.masked_fill(~allowed, float("-inf")) / temperature


def distinct_prompts(tasks, tokenizer):
    """The distinct prompts of tasks (as <bos> + ids) and, for each task, the index of its prompt."""
    return distinct_texts([t.prompt for t in tasks], lambda p: tokenizer.encode(p, add_bos=True))


@torch.no_grad()
def collect_rollout(model, tokenizer, tasks, *, allowed: torch.Tensor, temperature: float,
                    max_new_tokens: int, generator: torch.Generator, reward_fn=None,
                    timeout: float = 2.0, bootstrap_truncated: bool = False) -> Rollout:
    """Sample one episode per task in lockstep; score them all with ONE run_tests_batch call.

    Only the episodes still running are fed to the network at each step (finished rows
    drop out of the batch), so a few long episodes do not make every row pay for them.
    The network runs on the model's device; each step's logits come back to the CPU, where the
    token is drawn with `generator` (a CPU generator, whatever the device) and the Rollout is kept.
    A GPU's logits differ from a CPU's in the last bits, so a GPU run's samples drift from a CPU run's.
    """
    B = len(tasks)
    prompts, prompt_index = distinct_prompts(tasks, tokenizer)
    actions = torch.full((B, max_new_tokens), tokenizer.pad_id, dtype=torch.long)
    logprobs, step_values = torch.zeros(B, max_new_tokens), torch.zeros(B, max_new_tokens)
    mask = torch.zeros(B, max_new_tokens)

    def sample(logits: torch.Tensor) -> torch.Tensor:
        return torch.multinomial(torch.softmax(masked_logits(logits, allowed, temperature), -1), 1,
                                 generator=generator).squeeze(-1)

    def record_token(t, rows, logits, values, action):  # what PPO needs of each written token
        logprobs[rows, t] = torch.log_softmax(masked_logits(logits, allowed, temperature), -1).gather(
            -1, action[:, None]).squeeze(-1)
        actions[rows, t], step_values[rows, t], mask[rows, t] = action, values, 1.0

    # each distinct prompt read once; finished rows leave the batch
    written = decode(model, prompts, sample, eos_id=tokenizer.eos_id, max_new_tokens=max_new_tokens,
                     prompt_index=prompt_index, drop_finished=True, on_token=record_token)
    env = BatchedCodeGen(tokenizer, max_new_tokens=max_new_tokens, reward_fn=reward_fn or fraction_passed,
                         alphabet=allowed.nonzero().flatten().tolist(), timeout=timeout)
    env.reset(tasks)
    for t in range(max_new_tokens):  # the environment takes each written token (rows already done ignore theirs)
        if env.step(np.where(mask[:, t].numpy() > 0, actions[:, t].numpy(), tokenizer.eos_id)).done.all():
            break
    episodes = env.results()  # the sandbox runs every program here, in one batch

    T = int(mask.sum(1).max())
    rewards = last_token_rewards([e.reward for e in episodes], mask[:, :T])
    bootstrap = torch.zeros(B)
    truncated = torch.tensor([e.truncated for e in episodes])
    if bootstrap_truncated and truncated.any():
        # V(state after the cut): the truncated rows were all still writing at the last step; one more critic step
        # for those rows. A row among them that wrote <eos> at that step ended: it keeps a bootstrap of 0.
        rows = written.last_rows
        _, next_values, _ = model.step(actions[rows, -1].to(model.embed.weight.device), written.hidden)
        bootstrap[rows] = next_values.cpu() * truncated[rows]
    return Rollout(tasks=list(tasks), episodes=episodes, prompts=prompts, prompt_index=prompt_index,
                   actions=actions[:, :T], logprobs=logprobs[:, :T], values=step_values[:, :T],
                   mask=mask[:, :T], rewards=rewards, bootstrap=bootstrap)


def run_gru(model, tokens: torch.Tensor, lengths: torch.Tensor, hidden: torch.Tensor | None = None):
    """model(tokens, hidden) -> logits, values, computing each row only for its own length.

    Packing skips the padding at the end of short rows: the cost is the real tokens,
    not rows x longest row. Outputs past a row's length are zeros (to be masked).
    """
    packed = pack_padded_sequence(model.embed(tokens), lengths.clamp(min=1).cpu(), batch_first=True,
                                  enforce_sorted=False)
    out, _ = model.gru(packed, hidden)
    out, _ = pad_packed_sequence(out, batch_first=True, total_length=tokens.shape[1])
    return model.policy_head(out), model.value_head(out).squeeze(-1)


def evaluate_actions(model, prompts, prompt_index, actions, mask, *, allowed, temperature):
    """Re-read the episodes with the current weights: log pi(a_t), entropy H_t and V(s_t), each [B, T].

    Each distinct prompt is read once (`prefill`); its final state starts the GRU over
    that prompt's episodes. The state before generated token t is the prompt's for
    t = 0 and the output after token t - 1 otherwise. Gradients flow through both.
    The outputs are on the model's device (`GRUActor` brings them to the rollout's, the CPU).
    """
    device = model.embed.weight.device
    prompt_index, actions, mask, allowed = (x.to(device) for x in (prompt_index, actions, mask, allowed))
    first_logits, first_values, hidden = model.prefill(prompts)
    logits, values = first_logits[prompt_index, None], first_values[prompt_index, None]
    if actions.shape[1] > 1:
        lengths = mask.sum(1).long() - 1   # tokens fed back in: all but the last
        rest_logits, rest_values = run_gru(model, actions[:, :-1], lengths, hidden[:, prompt_index].contiguous())
        logits, values = torch.cat([logits, rest_logits], 1), torch.cat([values, rest_values], 1)
    real = mask.bool()
    actions = torch.where(real, actions, allowed.nonzero()[0])  # padding: any allowed id, so no -inf is picked
    log_p = torch.log_softmax(masked_logits(logits, allowed, temperature), -1)
    new_logprobs = log_p.gather(-1, actions[..., None]).squeeze(-1)
    entropy = -(log_p.exp() * log_p.masked_fill(~allowed, 0.0)).sum(-1)  # 0 * -inf would be nan
    zero = torch.zeros((), device=device)
    return torch.where(real, new_logprobs, zero), torch.where(real, entropy, zero), torch.where(real, values, zero)


class GRUActor:
    """The GRU policy as the RL core sees it (`course_lib.core.update.Policy`): it re-reads a rollout's own ids.

    allowed and temperature are the rollout policy's (the action mask, softmax(logits / T));
    reference: a frozen copy of the starting model for the KL term, or None.
    The network runs on its device; what `score` returns is on the CPU, with the Rollout, so the loss
    is computed there (gradients flow back through the copy), as for the language model's `LMActor`.
    """

    def __init__(self, model, *, allowed: torch.Tensor, temperature: float, reference=None):
        self.model, self.allowed, self.temperature, self.reference = model, allowed, temperature, reference

    def score(self, ro: Rollout, rows: torch.Tensor):
        prompts, prompt_index, T = minibatch(ro, rows)
        return tuple(x.cpu() for x in evaluate_actions(self.model, prompts, prompt_index, ro.actions[rows, :T],
                                                       ro.mask[rows, :T], allowed=self.allowed,
                                                       temperature=self.temperature))

    @torch.no_grad()
    def reference_logprobs(self, ro: Rollout, rows: torch.Tensor) -> torch.Tensor:
        prompts, prompt_index, T = minibatch(ro, rows)
        return evaluate_actions(self.reference, prompts, prompt_index, ro.actions[rows, :T], ro.mask[rows, :T],
                                allowed=self.allowed, temperature=self.temperature)[0].cpu()
