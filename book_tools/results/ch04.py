"""Chapter 4's Results page: pretraining on task variants, on a CPU and on a GPU."""

from __future__ import annotations

import re

from book_tools.results.common import code_block, md_table, mean_pm, read_record, record_provenance


_VARIANTS_CPU = "notebooks/data/variants_pretraining.json"


_VARIANTS_GPU = {"same_data_seed0": "same data, 4x the updates",
                 "two_digit_seed0": "two-digit blanks, hidden 512", "two_digit_seed1": "two-digit blanks, hidden 512",
                 "two_digit_seed2": "two-digit blanks, hidden 512"}


_VARIANTS_COMMITTED = "not in the record; the file was committed on 2026-11-22"


def _docstring(prompt: str) -> str:
    return prompt.split('"""')[1]


def _program(code: str) -> str:
    """A generated body as one table cell: its lines (stripped) joined by ⏎."""
    return code_block(" ⏎ ".join(line.strip() for line in code.strip().splitlines()))


def _variants_provenance(record: dict, path: str, machine: str) -> str:
    return record_provenance({**record, "device": record["settings"]["device"], "machine": machine,
                        "date": _VARIANTS_COMMITTED}, path)


def _variants_counts(counts: dict) -> list:
    return [counts["written"], counts["dropped_as_held_out_answers"], counts["dropped_for_vocabulary"],
            counts["seen"] + counts["unseen"], counts["docstrings"], counts["unseen_docstrings"], counts["unseen"],
            counts["seen"], counts["train_pairs"]]


_COUNT_HEADER = ["variants written", "dropped: pass a held-out task", "dropped: a character outside the vocabulary",
                 "kept", "docstrings kept", "unseen docstrings", "unseen variants", "seen variants (trained on)",
                 "train pairs (46 x 3)"]


def _variant_misses(record: dict) -> tuple[list, list, list]:
    """The unseen variants written wrong, those of them that are the right code with other digits, and a table
    of the first six of each kind."""
    misses = [r for r in record["unseen_outputs"] if not r["exact"]]

    def shape(code: str) -> str:  # the code with every digit blanked out
        return re.sub(r"[0-9]", "#", code)
    number_only = [r for r in misses if shape(r["output"]) == shape(r["solution"])]
    others = [r for r in misses if r not in number_only]
    examples = ([["another number", _docstring(r["prompt"]), _program(r["solution"]), _program(r["output"])]
                 for r in number_only[:6]]
                + [["another kind", _docstring(r["prompt"]), _program(r["solution"]), _program(r["output"])]
                   for r in others[:6]])
    return misses, number_only, examples


def variants_cpu_section() -> str:
    record = read_record(_VARIANTS_CPU)
    if record is None:
        return ""
    s, counts, exact, rate = record["settings"], record["counts"], record["exact"], record["pass_rate"]
    misses, number_only, examples = _variant_misses(record)
    from course_lib.tasks import load_tasks
    used = {c for t in load_tasks() if t.split == "train" for c in t.solution}
    missing = ", ".join(d for d in "0123456789" if d not in used)
    passed = set(record["passed"]["val"])
    val = [[task, _program(program), "yes" if task in passed else "no"]
           for task, program in sorted(record["val_outputs"].items())]
    return "\n\n".join([
        "## More examples of the same kind, on a CPU",
        "Pretrained on the 46 train pairs, chapter 4's GRU (its section 8) answers a held-out task with a nearby "
        "training task's program (`quintuple`, \"Return x multiplied by 5\", gets `return x * 3`). Would more "
        "data of the same kind teach it to read the docstring? `course_lib.gru.variants` writes that data. Its unit "
        "is a "
        "**template**: a sentence and code with the same blank, such as \"Return x multiplied by _.\" → "
        "`return x * _`. Filling the blanks with other numbers, conditions, words and argument names gives many "
        "docstrings; each is written under meaningless function names such as `f`, so only the docstring says "
        "what to write.",
        "- **The leak check.** Each variant runs against the tests of every val and test task with as many "
        "arguments (in the sandbox, renamed to the task's function name); one that passes all the tests of a "
        "held-out task is dropped (so is one whose text holds a held-out solution), and a check that does not finish "
        "is an error. Pieces of held-out programs can stay, as in the train tasks: `[x * 5 for x in xs]` passes no "
        "held-out task.\n"
        f"- **Unseen variants.** A share ({s['unseen_share']:.0%}) of the docstrings, with every function written "
        "under them, is never trained on: the model has met their template only with other values in the blank, if "
        "at all.\n"
        "- **How they are scored.** Greedy output against the variant's body, character for character; the course's "
        f"tasks against their tests. No action mask: variant bodies need characters the training solutions lack "
        f"(the digits {missing} among them).",
        "The variants, and the examples pretraining used (the train pairs three times each plus the seen variants):",
        md_table(_COUNT_HEADER, [_variants_counts(counts)]),
        "The first eight variants dropped because they pass a held-out task's tests (the record keeps eight), by "
        "docstring:",
        md_table(["docstring", "passes"], [[doc, ", ".join(ids)] for doc, ids in counts["dropped_examples"].items()]),
        "The run (chapter 4's GRU, other settings; one seed):",
        md_table(["device", "seed", "threads", "embed_dim", "hidden_dim", "names per docstring", "epochs", "batch size",
                "lr", "updates", "seconds", "final loss"],
               [[s["device"], s["seed"], s["threads"], s["embed_dim"], s["hidden_dim"], s["copies"], s["epochs"],
                 s["batch_size"], s["lr"], record["updates"], f"{record['pretrain_seconds']:.0f}",
                 f"{record['final_loss']:.3f}"]]),
        md_table(["seen variants: output = body", f"unseen variants ({counts['unseen']}): output = body",
                "train: greedy pass@1", "val (never trained on): greedy pass@1",
                "test (never trained on): greedy pass@1", "held-out tasks passed"],
               [[f"{exact['seen']:.1%}", f"{exact['unseen']:.1%}", f"{rate['train']:.3f}", f"{rate['val']:.3f}",
                 f"{rate['test']:.3f}", ", ".join(record["passed"]["val"] + record["passed"]["test"]) or "none"]]),
        f"Of the {len(record['unseen_outputs'])} unseen variants, {len(misses)} come out wrong; {len(number_only)} of "
        "those are the right code with other digits (\"another number\" below), the rest differ otherwise. The first "
        "six of each, in the record's order:",
        md_table(["miss", "docstring", "body", "greedy output"], examples),
        "The greedy program for each val task:",
        md_table(["val task", "greedy program", "passes"], val),
        _variants_provenance(record, _VARIANTS_CPU, "not recorded")])


def variants_gpu_section() -> str:
    records = {name: read_record(f"notebooks/data/variants_gpu/{name}.json") for name in _VARIANTS_GPU}
    records = {name: r for name, r in records.items() if r is not None}
    if not records:
        return ""
    names = [name for name in _VARIANTS_GPU if name in records]
    rows = [[_VARIANTS_GPU[n], r["settings"]["seed"], r["settings"]["device"], r["settings"]["hidden_dim"],
             r["settings"]["extra_constants"], r["counts"]["examples"], r["settings"]["epochs"], r["updates"],
             f"{r['pretrain_seconds']:.0f}", f"{r['exact']['seen']:.1%}",
             f"{r['exact']['unseen']:.1%} of {r['counts']['unseen']}", f"{r['pass_rate']['train']:.3f}",
             f"{r['pass_rate']['val']:.3f}", f"{r['pass_rate']['test']:.3f}",
             ", ".join(r["passed"]["val"] + r["passed"]["test"]) or "none"]
            for n, r in ((n, records[n]) for n in names)]
    two_digit = [records[n] for n in names if n.startswith("two_digit")]
    summary = [[measure, len(two_digit), mean_pm([f(r) for r in two_digit])]
               for measure, f in (("unseen variants: output = body", lambda r: r["exact"]["unseen"]),
                                  ("train: greedy pass@1", lambda r: r["pass_rate"]["train"]),
                                  ("val (never trained on): greedy pass@1", lambda r: r["pass_rate"]["val"]),
                                  ("test (never trained on): greedy pass@1", lambda r: r["pass_rate"]["test"]))]
    tasks = sorted(next(iter(records.values()))["val_outputs"])
    programs = [[task] + [_program(records[n]["val_outputs"][task])
                          + (" (passes)" if task in records[n]["passed"]["val"] else "") for n in names]
                for task in tasks]
    machine = "not recorded (the script's docstring says one NVIDIA H100)"
    return "\n\n".join([
        "## More compute, and blanks drawn from more numbers, on a GPU",
        "The same script on a GPU, two ways. **Same data, 4x the updates**: the CPU run's settings with four times "
        "the epochs. **Two-digit blanks, hidden 512**: every number template also draws from 40 random two-digit "
        "constants (`--extra-constants 40`), so each template is seen with many more values; the GRU's memory is "
        "doubled (`hidden_dim` 512) and it makes more updates; three seeds (runs that differ only in their random "
        "draws, here also in the constants drawn). These runs change three things at once (data, memory, updates), "
        "so they do not say which one brings the difference. Seconds are the GPU's pretraining time.",
        md_table(["run", "seed", "device", "hidden_dim", "extra constants", "examples", "epochs", "updates", "seconds",
                "seen variants: output = body", "unseen variants: output = body", "train: greedy pass@1",
                "val (never trained on): greedy pass@1", "test (never trained on): greedy pass@1",
                "held-out tasks passed"], rows),
        f"The two-digit runs over their {len(two_digit)} seeds (mean ± standard error):",
        md_table(["measure", "seeds", "mean ± SE"], summary),
        "The greedy program for each val task, by run (seeds 0 and 1 of the two-digit runs are saved as "
        "`notebooks/checkpoints/variants_gpu/two_digit_seed0.pt` and `..._seed1.pt`, the copying start of "
        "[chapter 6's results](06_ppo_and_gae.md)):",
        md_table(["val task"] + [f"{_VARIANTS_GPU[n]}, seed {records[n]['settings']['seed']}" for n in names], programs),
        "\n".join("- " + _variants_provenance(records[n], f"notebooks/data/variants_gpu/{n}.json", machine) for n in names)])
