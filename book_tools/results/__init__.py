"""The book's Results part: one page per chapter with records, written from the record files.

A chapter keeps the one table that carries its lesson; the experiment records behind it (seed
tables, speed measurements, GPU runs) are shown here, each with the device, seeds, date and the
command that remakes it. Every table on these pages is computed from a record file in
notebooks/data/ (the one records folder), never typed in:

    python -m book_tools.results            rewrite book/results/*.md from the records
    python -m book_tools.results --check    exit 1 if a page differs from what the records give (a test runs it)

One module a page (chapter 10's in three): common.py holds what their sections share.
"""

from __future__ import annotations

import argparse
import sys

from book_tools import REPO_ROOT
from book_tools.results.ch04 import variants_cpu_section, variants_gpu_section
from book_tools.results.ch06 import (copying_start_section, explore_section, gru_methods_section, lambda_section,
    ppo_benchmark_section)
from book_tools.results.ch10_cpu import (cpu_methods_section, cpu_seeds_section, engine_candidates_section,
    engine_section, start_sampled_section, tiny_coder_section)
from book_tools.results.ch10_humaneval import (course_humaneval_section, humaneval_problems_section,
    humaneval_protocol_section)
from book_tools.results.ch10_gpu import (gpu_engine_section, gpu_long_section, gpu_seeds_fast_section,
    gpu_seeds_long_section, gpu_seeds_section, section1_seeds_section)

RESULTS_DIR = REPO_ROOT / "book" / "results"


PAGES = {
    "04_gru_pretraining": ("Chapter 4 results: pretraining on task variants",
                           "The records behind the side study of "
                           "[chapter 4](../../notebooks/04_gru_pretraining.ipynb): does pretraining on many variants "
                           "of the train tasks teach the GRU to read the docstring? Every rate is greedy (one greedy "
                           "output per variant or task).",
                           (variants_cpu_section, variants_gpu_section)),
    "06_ppo_and_gae": ("Chapter 6 results: PPO and GAE",
                       "The records behind [chapter 6](../../notebooks/06_ppo_and_gae.ipynb): the GRU trained by "
                       "PPO on a CPU. Every pass rate is a greedy pass@1 (one greedy program per task), "
                       "and every ± is a standard error over random seeds.",
                       (copying_start_section, ppo_benchmark_section, explore_section, lambda_section,
                        gru_methods_section)),
    "10_lora_rl": ("Chapter 10 results: LoRA-RL on a real model",
                   "The records behind [chapter 10](../../notebooks/10_lora_rl.ipynb).",
                   (engine_section, engine_candidates_section, cpu_seeds_section, start_sampled_section,
                    cpu_methods_section,
                    humaneval_protocol_section, humaneval_problems_section, course_humaneval_section,
                    gpu_long_section, gpu_seeds_section, gpu_seeds_fast_section, gpu_seeds_long_section,
                    section1_seeds_section,
                    gpu_engine_section,
                    tiny_coder_section)),
}


def render(name: str) -> str:
    title, intro, sections = PAGES[name]
    parts = [f"# {title}", intro + " Every table below is computed by `python -m book_tools.results` from the "
             "record file it names."]
    parts += [s for s in (section() for section in sections) if s]
    return "\n\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m book_tools.results", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that every page is up to date")
    args = parser.parse_args(argv)
    stale = []
    for name in PAGES:
        path = RESULTS_DIR / f"{name}.md"
        text = render(name)
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path.relative_to(REPO_ROOT)))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path.relative_to(REPO_ROOT)}")
    if stale:
        print("stale results page(s): " + ", ".join(stale) + "; run python -m book_tools.results", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
