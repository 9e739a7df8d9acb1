"""benchmarks/smollm2_humaneval_problems.py: how a rerun's training curve is compared with its record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import load_benchmark

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def rerun():
    return load_benchmark("smollm2_humaneval_problems")


def test_counts_must_be_equal_and_float_diagnostics_close(rerun):
    recorded = [{"step": 1, "reward": 0.5, "kl_ref": 0.010, "clip_frac": 0.02, "seconds": 30.0}]
    same = [{"step": 1, "reward": 0.5, "kl_ref": 0.010000001, "clip_frac": 0.02, "seconds": 31.5}]
    differences, worst = rerun.curve_differences(same, recorded)
    assert differences == [] and 0 < worst < rerun.FLOAT_TOLERANCE
    other = [{"step": 1, "reward": 0.25, "kl_ref": 0.010, "clip_frac": 0.03, "seconds": 30.0}]
    differences, worst = rerun.curve_differences(other, recorded)
    assert differences == [{"step": 1, "field": "clip_frac", "value": 0.03, "recorded": 0.02},
                           {"step": 1, "field": "reward", "value": 0.25, "recorded": 0.5}]
    assert worst == pytest.approx(0.5)
    assert rerun.describe(differences[0]) == "step 1 clip_frac: 0.03, recorded 0.02"
    differences, _ = rerun.curve_differences(same + same, recorded)
    assert [rerun.describe(d) for d in differences] == ["steps: 2, recorded 1"]


def test_the_committed_record_keeps_differences_as_entries(rerun):
    record = json.loads((ROOT / "notebooks" / "data" / "smollm2_rl_humaneval.json").read_text())
    for run in record["runs"]:
        for d in run["differences_from_record"]:
            assert set(d) == {"step", "field", "value", "recorded"} and d["field"] in rerun.FLOATS, d
