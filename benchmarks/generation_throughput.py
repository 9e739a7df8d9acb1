"""How fast SmolLM2-135M-Instruct writes on this machine: generated tokens per second by batch size
and torch threads, through the course's own `evaluation.generate` (key-value cache on, as always).

Each setting answers the same chat prompts (the first N_PROMPTS `train` tasks, greedy, up to
MAX_NEW_TOKENS tokens), after one warm-up pass of the whole script; the record keeps the time and
the tokens written before <eos>. A batch runs until
its longest answer ends, so tokens/s counts only the useful tokens: what a reader waits for.

    python benchmarks/generation_throughput.py     writes benchmarks/records/generation_throughput.json
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from _common import write_json  # benchmarks/_common.py (this folder is on sys.path when run as a script)

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
OUTPUT = REPO_ROOT / "benchmarks" / "records" / "generation_throughput.json"

MODEL = "smollm2-135m-instruct"
N_PROMPTS = 16
MAX_NEW_TOKENS = 128
SETTINGS = [(1, 2), (4, 2), (16, 2), (16, 1)]  # (batch_size, torch threads)


def main() -> None:
    import torch
    import transformers

    from course_lib import evaluation, model_zoo
    from book_tools.reproduce import cpu_model
    from course_lib.tasks import load_tasks

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    transformers.utils.logging.disable_progress_bar()
    model, tokenizer = model_zoo.load_model(MODEL, "cpu")
    tasks = [t for t in load_tasks() if t.split == "train"][:N_PROMPTS]
    prompts = [evaluation.prompt_for(t, "chat", tokenizer) for t in tasks]
    evaluation.generate(model, tokenizer, prompts[:4], temperature=0.0, max_new_tokens=16, stop_sequences=())  # warm-up
    rows = []
    for batch_size, threads in SETTINGS:
        torch.set_num_threads(threads)
        n = N_PROMPTS if batch_size > 1 else 4  # one prompt at a time is slow: 4 of them are enough
        start = time.perf_counter()
        gens = evaluation.generate(model, tokenizer, prompts[:n], temperature=0.0, max_new_tokens=MAX_NEW_TOKENS,
                                   stop_sequences=(), batch_size=batch_size)
        seconds = time.perf_counter() - start
        tokens = sum(g.n_tokens for g in gens)
        row = {"batch_size": batch_size, "threads": threads, "prompts": n,
               "tokens": tokens, "seconds": round(seconds, 2), "tokens_per_s": round(tokens / seconds, 1)}
        rows.append(row)
        print(f"batch {batch_size:>2}, {threads} thread(s): "
              f"{row['tokens_per_s']:>6.1f} tokens/s ({tokens} tokens in {row['seconds']:.1f} s)", flush=True)
    best = max(rows, key=lambda r: r["tokens_per_s"])
    write_json(OUTPUT, {"script": "benchmarks/generation_throughput.py", "model": MODEL,
                        "max_new_tokens": MAX_NEW_TOKENS, "rows": rows, "fastest": best,
                        "machine": f"cpu ({cpu_model() or 'unknown CPU'}), {os.cpu_count()} cores"})
    print(f"fastest: batch {best['batch_size']}, {best['threads']} thread(s): {best['tokens_per_s']} tokens/s; "
          f"wrote {OUTPUT.relative_to(REPO_ROOT)}")


if __name__ == "__main__":
    main()
