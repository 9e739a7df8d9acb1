"""The benchmark records the chapters plot were made from the checkpoint the chapters load
(chapter 4's GRU; chapter 9's tiny coder and its SFT adapter)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from course_lib.runs import check_record_made_from

ROOT = Path(__file__).resolve().parents[1]
RECORDS = sorted((ROOT / "notebooks" / "data").glob("*.json"))
FROM_CHECKPOINT = [p for p in RECORDS if json.loads(p.read_text()).get("pretrained", "").endswith(".pt")]
# chapter 9's model + adapter: their files, listed under "start" (other records keep the start's measurements there)
FROM_TINY_CODER = [p for p in RECORDS if isinstance(json.loads(p.read_text()).get("start"), list)]


def test_some_records_start_from_chapter_4s_checkpoint():
    assert {p.stem for p in FROM_CHECKPOINT} >= {"explore_ablation", "reward_ablation", "teacher_ablation"}


@pytest.mark.parametrize("record", FROM_CHECKPOINT, ids=lambda p: p.stem)
def test_record_was_made_from_the_committed_checkpoint(record):
    data = json.loads(record.read_text())
    check_record_made_from(data, ROOT / data["pretrained"], record_name=f"notebooks/data/{record.name}",
                           remake=data.get("command") or f"python benchmarks/{record.stem}.py")


def test_chapter_10s_record_starts_from_chapter_9s_tiny_coder():
    from course_lib.lm import llm

    assert [p.stem for p in FROM_TINY_CODER] == ["llm_rl_benchmark"]
    start = json.loads(FROM_TINY_CODER[0].read_text())["start"]
    assert [ROOT / p for p in start] == llm.tiny_start_files()


@pytest.mark.parametrize("record", FROM_TINY_CODER, ids=lambda p: p.stem)
def test_record_was_made_from_the_committed_tiny_coder(record):
    data = json.loads(record.read_text())
    check_record_made_from(data, [ROOT / p for p in data["start"]], record_name=f"notebooks/data/{record.name}",
                           remake=data.get("command") or f"python benchmarks/{record.stem}.py")


def test_the_fallback_recipe_is_chapter_4s():
    """Chapters 5 and 6 re-make chapter 4's model with pretrain.BROAD_RECIPE when its checkpoint is missing."""
    import ast

    from course_lib.gru.pretrain import BROAD_RECIPE

    nb = json.loads((ROOT / "notebooks" / "04_gru_pretraining.ipynb").read_text())
    cell = next(c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
    params = {node.targets[0].id: ast.literal_eval(node.value) for node in ast.parse("".join(cell["source"])).body
              if isinstance(node, ast.Assign)}
    assert params["chosen_regime"] == "broad"
    chapter_4 = dict(embed_dim=params["embed_dim"], hidden_dim=params["hidden_dim"], lr=params["lr"],
                     epochs=params["broad_epochs"], batch_size=params["broad_batch_size"],
                     train_repeats=params["train_repeats"], max_body_chars=params["max_body_chars"])
    assert BROAD_RECIPE == chapter_4


def test_how_to_run_quotes_the_step_and_memory_records():
    """The timings and memory peaks "How to run" gives for SmolLM2 on a CPU are those its records hold."""
    page = (ROOT / "book" / "how_to_run.md").read_text()
    page = " ".join(page.split())
    step = json.loads((ROOT / "notebooks/data/smollm2_step_time.json").read_text())["summary"]["mean"][
        "reference once per set of rows"]
    assert (f"({step['step_seconds']:.0f} s on 2 cores of an AMD EPYC: {step['rollout_seconds']:.0f} s to sample them"
            in page), step
    assert f"{step['learn_seconds']:.0f} s to learn" in page, step
    ways = json.loads((ROOT / "notebooks/data/scoring_benchmark.json").read_text())["summary"]["ways"]
    micro, whole = ways["course, micro 4"], ways["course"]
    assert (f"a {micro['peak_rss_mb'] / 1024:.1f} GB peak and {micro['seconds']:.1f} s in micro-batches of 4, against "
            f"{whole['peak_rss_mb'] / 1024:.1f} GB and {whole['seconds']:.1f} s at once") in page, ways
    assert f"about {whole['peak_rss_mb'] / 1024:.0f} GB for 16 completions" in page, ways
