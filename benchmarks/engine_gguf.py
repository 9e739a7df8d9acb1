"""llama.cpp for benchmarks/engine_candidates.py: GGUF files written from the course's weights (float32, or a
LoRA adapter), and LlamaCpp, llama.cpp's C API through llama-cpp-python's ctypes bindings (a worker process
hosts it: benchmarks/engine_workers.py)."""

from __future__ import annotations

import ctypes
from pathlib import Path

try:  # imported as benchmarks.engine_gguf, or from benchmarks/
    from .engine_setup import LLAMA_BATCH, LORA
except ImportError:
    from engine_setup import LLAMA_BATCH, LORA



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
