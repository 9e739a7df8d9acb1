"""Does more data of the same kind teach the GRU to read the docstring? (chapter 4)

    python benchmarks/variants_pretraining.py [--epochs 60] [--seed 0] [--out notebooks/data/variants_pretraining.json]

Pretrains chapter 4's GRU (embed 64, hidden 256) on the 46 train pairs (3 copies each) plus the
task variants of `course_lib.gru.variants` (the same idioms with other numbers, conditions and words,
every one named f, solve, ... so that only the docstring says what to write; each docstring is
written under two such names). A tenth of the docstrings, with all their variants, is left out of
pretraining: the unseen variants. Then, greedily (no action mask):

- variants seen in pretraining, and unseen variants: is the output exactly the variant's body?
- the train, val and test tasks: does the output pass the tests (in the sandbox)?

Writes the settings, the counts, the figures, every unseen variant's output and the val tasks'
outputs to --out. About 3.5 minutes on 2 cores (2 torch threads).

Chapter 4's Results page (book/results/04_gru_pretraining.md, written by python -m book_tools.results)
shows this record and notebooks/data/variants_gpu/, recorded on one NVIDIA H100 (about 2 minutes each):

    --device cuda --epochs 240 --out notebooks/data/variants_gpu/same_data_seed0.json
    --device cuda --epochs 100 --hidden-dim 512 --extra-constants 40 --seed N \
        --out notebooks/data/variants_gpu/two_digit_seedN.json          (N = 0, 1, 2)
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from _common import machine, new_record, write_json  # benchmarks/_common.py (this folder is on sys.path when run as a script)

ROOT = Path(__file__).resolve().parents[1]


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=60)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=ROOT / "notebooks/data/variants_pretraining.json")
    p.add_argument("--hidden-dim", type=int, default=256)
    p.add_argument("--copies", type=int, default=2, help="functions written per docstring")
    p.add_argument("--extra-constants", type=int, default=0, help="two-digit constants added to 1..9")
    p.add_argument("--device", default="cpu", help="e.g. cuda: the same experiment with more compute")
    p.add_argument("--save", type=Path, help="also save the pretrained model as a course checkpoint here "
                                            "(a start for `python -m course_lib ppo --pretrained`)")
    return p.parse_args(argv)


def pretraining_data(args, settings: dict, tokenizer, tasks) -> dict:
    """The variants written, those dropped (a held-out task's answer, a character outside the vocabulary), the
    docstrings left unseen, and the examples pretraining uses: the train pairs and the seen variants."""
    from course_lib.corpus import Example, find_leaks, task_examples
    from course_lib.gru.variants import all_variants, held_out_matches, safe_variants

    options = dict(seed=args.seed, copies=args.copies, extra_constants=args.extra_constants)
    written = all_variants(**options)
    in_vocab = [v for v in written if set(v.prompt + v.solution) <= set(tokenizer.vocab[3:])]
    variants = safe_variants(tasks, vocab=tokenizer.vocab[3:], **options)
    # unseen variants: a tenth of the DOCSTRINGS, with every function written under them (a docstring
    # seen under the name `f` must not count as unseen under the name `solve`)
    docstrings = sorted({v.doc for v in variants})
    random.Random(args.seed).shuffle(docstrings)
    unseen_docs = set(docstrings[:round(len(docstrings) * settings["unseen_share"])])
    seen = [v for v in variants if v.doc not in unseen_docs]
    examples = (task_examples([t for t in tasks if t.split == "train"]) * settings["train_repeats"]
                + [Example(v.prompt, v.solution, f"variant:{v.name}") for v in seen])
    assert not find_leaks(examples, tasks)
    return dict(written=written, dropped=held_out_matches(written, tasks), in_vocab=in_vocab, docstrings=docstrings,
                unseen_docs=unseen_docs, seen=seen, unseen=[v for v in variants if v.doc in unseen_docs],
                examples=examples)


def exact_rows(model, tokenizer, group) -> list[dict]:
    """Each variant's greedy output, and whether it is the variant's body exactly."""
    from course_lib.gru.models import generate

    outputs = generate(model, tokenizer, [v.prompt for v in group], max_new_tokens=160, greedy=True)
    return [{"prompt": v.prompt, "solution": v.solution, "output": o, "exact": o.strip() == v.solution.strip()}
            for v, o in zip(group, outputs)]


def counts_of(data: dict) -> dict:
    return {"written": len(data["written"]), "dropped_as_held_out_answers": len(data["dropped"]),
            "dropped_for_vocabulary": len(data["written"]) - len(data["in_vocab"]),
            "docstrings": len(data["docstrings"]), "unseen_docstrings": len(data["unseen_docs"]),
            "dropped_examples": {prompt.split('"""')[1]: ids for prompt, ids in list(data["dropped"].items())[:8]},
            "seen": len(data["seen"]), "unseen": len(data["unseen"]),
            "train_pairs": len(data["examples"]) - len(data["seen"]), "examples": len(data["examples"])}


def main(argv=None) -> int:
    import torch

    from course_lib.gru.models import GRUConfig, GRUPolicy
    from course_lib.gru.pretrain import evaluate_pass_rate, pretrain
    from course_lib.tasks import load_tasks
    from course_lib.tokenizers import course_tokenizer

    args = parse(argv)
    settings = dict(epochs=args.epochs, seed=args.seed, lr=1e-2, batch_size=64, embed_dim=64,
                    hidden_dim=args.hidden_dim, copies=args.copies, extra_constants=args.extra_constants,
                    train_repeats=3, unseen_share=0.1, threads=2, device=args.device)
    torch.set_num_threads(settings["threads"])
    tokenizer, tasks = course_tokenizer(), load_tasks()
    data = pretraining_data(args, settings, tokenizer, tasks)

    torch.manual_seed(args.seed)
    model = GRUPolicy(GRUConfig(len(tokenizer), embed_dim=settings["embed_dim"],
                                hidden_dim=settings["hidden_dim"])).to(args.device)
    start = time.perf_counter()
    losses = pretrain(model, tokenizer, data["examples"], epochs=args.epochs, lr=settings["lr"],
                      batch_size=settings["batch_size"], seed=args.seed, progress=False)
    seconds = time.perf_counter() - start
    seen_rows, unseen_rows = exact_rows(model, tokenizer, data["seen"]), exact_rows(model, tokenizer, data["unseen"])
    results = {split: evaluate_pass_rate(model, tokenizer, [t for t in tasks if t.split == split], greedy=True)
               for split in ("train", "val", "test")}
    exact = {"seen": round(sum(r["exact"] for r in seen_rows) / len(seen_rows), 4),
             "unseen": round(sum(r["exact"] for r in unseen_rows) / len(unseen_rows), 4)}
    pass_rate = {split: r[f"{split}_greedy_pass@1"] for split, r in results.items()}  # the record's name
    record = new_record("benchmarks/variants_pretraining.py", config=settings, machine=machine(args.device),
                        device=args.device, seconds=time.perf_counter() - start,
                        args=sys.argv[1:] if argv is None else argv)
    record |= {
        "runs": [{"seed": args.seed, "exact_seen": exact["seen"], "exact_unseen": exact["unseen"],
                  **{f"{split}_greedy_pass@1": rate for split, rate in pass_rate.items()}}],
        "summary": {"exact": exact, "pass_rate": pass_rate},
        # the names chapter 4's Results page reads
        "settings": settings, "counts": counts_of(data),
        "pretrain_seconds": round(seconds, 1), "updates": len(losses),
        "final_loss": round(sum(losses[-20:]) / 20, 4), "exact": exact, "pass_rate": pass_rate,
        "passed": {split: sorted(row["id"] for row in r["per_task"] if row["greedy_passed"])
                   for split, r in results.items() if split != "train"},
        "unseen_outputs": unseen_rows,
        "val_outputs": {row["id"]: row["greedy_completion"] for row in results["val"]["per_task"]},
    }
    write_json(args.out, record)
    if args.save:
        from course_lib.gru.checkpoints import save_checkpoint
        save_checkpoint(args.save, model, tokenizer, extra={"regime": "variants", "benchmark": settings})
    print(f"{len(data['examples'])} examples ({len(data['seen'])} variants), {len(losses)} updates in {seconds:.0f} s, "
          f"loss {record['final_loss']}; exact seen {exact['seen']:.2f}, unseen {exact['unseen']:.2f}; "
          f"pass {pass_rate} -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
