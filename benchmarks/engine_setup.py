"""What every engine candidate of benchmarks/engine_candidates.py shares: the settings, the rows they write
(Prompts: the chat prompts and the tokenizer, all a worker process needs; Rollouts: with the float32 model and
the LoRA policy), a Candidate's parts, and two helpers (torch on n threads in a block; a timed call)."""

from __future__ import annotations

import importlib.util
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # course_lib, in a worker process too

MODEL = "smollm2-135m-instruct"
TEMPERATURE = 0.8
MAX_NEW_TOKENS = 128
GROUPS = ((0, 4), (4, 8))  # prompts of the first train tasks: two rollouts of 4 prompts
GROUP_SIZE = 4  # samples per prompt: 16 rows a rollout
TRIES = 2
KL_TOKENS = 48
LORA = dict(rank=8, alpha=16.0)  # chapter 10's adapter (course_lib.lm.llama.LORA_TARGETS: q_proj, v_proj)
LORA_B_STD = 0.1  # the adapter's B, random, for a trained adapter's stand-in (a fresh one has B = 0)
QUIET_LOAD, QUIET_WAIT_S, QUIET_POLL_S = 1.0, 600, 30
# a worker's environment: CTranslate2 leaves Intel's MKL off on AMD processors, and its default (DNNL) float32
# GEMM wrote 3-10 tokens/s here, MKL's ~75; for int8 its default is the fast one (~175 tokens/s, MKL's ~35)
WORKER_ENV = {"ctranslate2-f32": {"CT2_USE_MKL": "1"}}
LLAMA_BATCH = 4096  # tokens a llama_batch holds: every row's prompt at once
CANDIDATES = ("hf", "fast", "fast-bf16", "hf-static-compiled", "llama.cpp-q4_1", "llama.cpp-q4_1+lora",
              "llama.cpp-f32", "ctranslate2-f32", "ctranslate2-int8", "onnxruntime-genai-f32", "onnxruntime-genai-int4")
PACKAGES = {"llama.cpp": ("llama_cpp", "llama-cpp-python"), "ctranslate2": ("ctranslate2", "ctranslate2"),
            "onnxruntime-genai": ("onnxruntime_genai", "onnxruntime-genai")}
ORT_PAD = 0  # onnxruntime-genai masks its pad id out of the prompt: SmolLM2's (2, <|im_end|>) is in every chat prompt


@dataclass
class Candidate:
    name: str
    precision: str
    write: Callable  # (group index) -> useful tokens of that rollout
    logits: Callable | None = None  # (prompt ids, ids) -> the engine's [len(ids), vocab] logits before each id
    setup_s: float = 0.0  # loading, converting or compiling, once
    notes: dict = field(default_factory=dict)


class Prompts:
    """The rows every candidate writes: the chat prompts, their ids (<bos> and all), the tokenizer; light enough
    for a worker process (no model)."""

    def __init__(self):
        import torch
        from transformers import AutoTokenizer

        from course_lib.lm import model_zoo, protocol
        from course_lib.lm.llm import encode_prompt
        from course_lib.tasks import load_tasks

        self.folder = model_zoo.smollm2_folder()
        self.gguf = Path(importlib.util.find_spec(model_zoo.SMOLLM2_PACKAGE).submodule_search_locations[0],
                         model_zoo.SMOLLM2_GGUF)
        self.tokenizer = AutoTokenizer.from_pretrained(self.folder)
        train = [t for t in load_tasks() if t.split == "train"]
        self.prompts = [protocol.prompt_for(t, "chat", self.tokenizer) for t in train[:GROUPS[-1][1]]]
        self.ids = [encode_prompt(self.tokenizer, p) for p in self.prompts]
        self.eos = self.tokenizer.eos_token_id
        self.threads = torch.get_num_threads()

    def rows(self, group: int) -> list[list[int]]:
        start, stop = GROUPS[group]
        return [ids for ids in self.ids[start:stop] for _ in range(GROUP_SIZE)]

    def useful(self, written: list[list[int]]) -> int:
        return sum(len(ids) - (bool(ids) and ids[-1] == self.eos) for ids in written)


class Rollouts(Prompts):
    """The prompts, and the float32 model and LoRA policy (its B random) the candidates in this process share."""

    def __init__(self):
        super().__init__()
        import torch

        from course_lib.lm import lm_policy, model_zoo

        self.model, self.tokenizer = model_zoo.load_model(MODEL, "cpu")
        self.model.eval()
        self.policy, _ = lm_policy.load_policy(MODEL, "cpu", seed=0, **LORA)
        self.policy.eval()
        generator = torch.Generator().manual_seed(1)
        with torch.no_grad():
            for name, p in self.policy.named_parameters():
                if "lora_B" in name:
                    p.normal_(0.0, LORA_B_STD, generator=generator)


class torch_threads:
    """torch on `n` threads inside the block (1 while another library's threads compute: no two pools spinning)."""

    def __init__(self, n: int):
        self.n = n

    def __enter__(self):
        import torch

        self.before = torch.get_num_threads()
        torch.set_num_threads(self.n)

    def __exit__(self, *exc):
        import torch

        torch.set_num_threads(self.before)


def _timed(fn, *args, **kwargs):
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, round(time.perf_counter() - start, 3)
