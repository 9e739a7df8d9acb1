"""Fixtures shared by the test files."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# A tiny-coder-shaped LlamaForCausalLM small enough to build in a second.
SMALL_CODER = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                   num_key_value_heads=2, max_position_embeddings=1024)


def load_benchmark(name: str):
    """benchmarks/NAME.py as a module, with benchmarks/ on sys.path while it imports (a script's
    `from _common import ...`); sys.path is left as it was."""
    saved = list(sys.path)
    benchmarks = Path(__file__).resolve().parents[1] / "benchmarks"
    sys.path.insert(0, str(benchmarks))
    try:
        spec = importlib.util.spec_from_file_location(name, benchmarks / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path[:] = saved


@pytest.fixture(scope="module")
def tasks():
    from course_lib.tasks import load_tasks
    return load_tasks()


@pytest.fixture(scope="module")
def small_dir(tmp_path_factory, tasks):
    """A folder holding a small tiny-coder-shaped model and its tokenizer, as save_model writes it."""
    from course_lib.lm import llm
    texts = [t.prompt + t.solution for t in tasks if t.split == "train"]
    tokenizer = llm.train_tiny_tokenizer(texts, vocab_size=300)
    model = llm.build_tiny_coder(len(tokenizer), seed=0, **SMALL_CODER)
    return llm.save_model(model, tokenizer, tmp_path_factory.mktemp("small") / "model", {"note": "test"})
