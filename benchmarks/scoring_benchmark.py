"""What re-reading a rollout costs the language model: the time and peak memory of one `LMActor.score`
(forward and backward, as one minibatch of `rl.learn`) on SmolLM2-135M-Instruct, four ways:

    full logits, cache   the model's defaults: a KV cache built, the vocabulary's logits at every position
    full logits          use_cache=False
    course               use_cache=False and logits only at the T + 1 positions read (`logits_to_keep`),
                         what `course_lib.lm.lm_policy.LMActor` does
    course, micro 4      the same in micro-batches of 4 rows, each backward before the next forward: what
                         `update.accumulate` does with `RLConfig(micro_batch_size=4)` (the same gradient)

The rollout: 4 HumanEval training problems x 4 samples in the chat style, at most 128 new tokens,
sampled once and saved (the record gives the prompt and completion widths). Each way
runs in its own process (peak memory is per process), scores that rollout TRIES times and keeps the
fastest.

    python benchmarks/scoring_benchmark.py     writes notebooks/data/scoring_benchmark.json

The record gives each way's seconds and peak memory, and the sum of the log-probabilities it scored (the
four must agree).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from _common import machine, new_record, write_json  # benchmarks/_common.py (this folder is on sys.path when run as a script)

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
OUTPUT = REPO_ROOT / "notebooks" / "data" / "scoring_benchmark.json"
WAYS = ("full logits, cache", "full logits", "course", "course, micro 4")
THREADS = 2
TRIES = 3  # each way scores the rollout this many times; the fastest is kept


ROLLOUT = REPO_ROOT / "_build" / "scoring_rollout.pt"
TEMPERATURE = 0.8


def sample_rollout() -> None:
    import torch

    from course_lib.lm import llm_rl, lm_policy
    from course_lib.tasks import load_humaneval

    torch.set_num_threads(THREADS)
    model, tokenizer = lm_policy.load_policy("smollm2-135m-instruct", "cpu", seed=0)
    config = llm_rl.RLConfig(style="chat", group_size=4, max_new_tokens=128, temperature=TEMPERATURE)
    ro = llm_rl.rollout(model, tokenizer, load_humaneval("train")[:4], config, seed=0)
    ro.tasks, ro.episodes = [], []  # the ids, mask and prompts are all that scoring reads
    ROLLOUT.parent.mkdir(exist_ok=True)
    torch.save(ro, ROLLOUT)


def measure(way: str) -> dict:
    import torch

    from course_lib.lm import llama, lm_policy

    torch.set_num_threads(THREADS)
    model, tokenizer = lm_policy.load_policy("smollm2-135m-instruct", "cpu", seed=0)
    ro = torch.load(ROLLOUT, weights_only=False)  # our own file, written by sample_rollout
    actor = lm_policy.LMActor(model, tokenizer, TEMPERATURE)

    def score_by_default(ro, rows, use_cache):  # the old way: logits at every position
        batch, P, T = lm_policy.id_batch(ro, rows, actor.pad_id)
        out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                    position_ids=batch["position_ids"], use_cache=use_cache)
        logits = out.logits[:, P - 1:P - 1 + T].float() / actor.temperature
        logprobs = torch.log_softmax(logits, -1).gather(-1, batch["input_ids"][:, P:, None]).squeeze(-1)
        return logprobs * ro.mask[rows, :T]

    rows = torch.arange(ro.actions.shape[0])
    times, reference = [], None
    for _ in range(TRIES):
        model.zero_grad()
        start = time.perf_counter()
        if way == "course":
            logprobs = actor.score(ro, rows)[0]
            logprobs.sum().backward()
        elif way == "course, micro 4":
            parts = []
            for part in rows.split(4):  # the activations of 4 rows at a time; the gradients add up
                part_logprobs = actor.score(ro, part)[0]
                part_logprobs.sum().backward()
                parts.append(part_logprobs.detach())
            width = max(x.shape[1] for x in parts)
            logprobs = torch.cat([torch.nn.functional.pad(x, (0, width - x.shape[1])) for x in parts])
        else:
            logprobs = score_by_default(ro, rows, use_cache=way.endswith("cache"))
            logprobs.sum().backward()
        times.append(time.perf_counter() - start)
        reference = logprobs.detach()
    batch, P, T = lm_policy.id_batch(ro, rows, actor.pad_id)
    return {"way": way, "seconds": round(min(times), 3), "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
            "rows": len(rows), "prompt_width": P, "completion_width": T,
            "logprob_sum": round(float(reference.sum()), 4), "parameters": llama.trainable_parameter_count(model)}


def main() -> None:
    started = time.perf_counter()
    sample_rollout()
    rows = []
    for way in WAYS:
        out = subprocess.run([sys.executable, __file__, way], capture_output=True, text=True, check=True,
                             env={**os.environ, "OMP_NUM_THREADS": str(THREADS)})
        row = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(f"{way:<20} {row['seconds']:>7.2f} s  peak {row['peak_rss_mb']:>6} MB  (sum of log-probs {row['logprob_sum']})",
              flush=True)
    sums = [r["logprob_sum"] for r in rows]
    assert max(sums) - min(sums) < 1e-2, f"the four ways must score the same log-probabilities, got {sums}"
    record = new_record("benchmarks/scoring_benchmark.py",
                        config={"model": "smollm2-135m-instruct", "ways": list(WAYS), "tries": TRIES,
                                "rollout": "4 HumanEval training problems x 4 samples, chat style, up to 128 new "
                                           f"tokens at T = {TEMPERATURE}, seed 0"},
                        machine=machine(), device="cpu", seconds=time.perf_counter() - started, threads=THREADS)
    record["runs"] = rows
    record["summary"] = {"ways": {r["way"]: {"seconds": r["seconds"], "peak_rss_mb": r["peak_rss_mb"]} for r in rows},
                         "logprob_sums_agree_within": 1e-2}
    write_json(OUTPUT, record)
    print(f"wrote {OUTPUT.relative_to(REPO_ROOT)}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        print(json.dumps(measure(sys.argv[1])))
    else:
        main()
