"""The engines outside the course, for benchmarks/engine_candidates.py: llama.cpp, CTranslate2 and
onnxruntime-genai, each hosted by a worker process of its own (this file with --worker NAME WORKDIR, started by
Worker), and the main process's end of them (outside_engine, missing_package)."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path

try:  # imported as benchmarks.engine_workers, or from benchmarks/ (a worker process runs this file)
    from .engine_gguf import GGUFTemplate, LlamaCpp, write_lora_gguf
    from .engine_setup import (GROUP_SIZE, GROUPS, MAX_NEW_TOKENS, ORT_PAD, PACKAGES, TEMPERATURE, WORKER_ENV,
                               Candidate, Prompts, Rollouts, _timed, torch_threads)
except ImportError:
    from engine_gguf import GGUFTemplate, LlamaCpp, write_lora_gguf
    from engine_setup import (GROUP_SIZE, GROUPS, MAX_NEW_TOKENS, ORT_PAD, PACKAGES, TEMPERATURE, WORKER_ENV,
                              Candidate, Prompts, Rollouts, _timed, torch_threads)

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


def missing_package(name: str) -> str | None:
    """Why a candidate cannot run here (its package is not installed), or None."""
    for prefix, (module, package) in PACKAGES.items():
        if name.startswith(prefix) and importlib.util.find_spec(module) is None:
            return f"{package} is not installed (the docstring says how to install it)"
    return None


if __name__ == "__main__":  # a worker process, as Worker starts it
    if sys.argv[1:2] != ["--worker"] or len(sys.argv) != 4:
        raise SystemExit("usage: python benchmarks/engine_workers.py --worker NAME WORKDIR (Worker starts it; "
                         "the benchmark is python benchmarks/engine_candidates.py)")
    worker(sys.argv[2], Path(sys.argv[3]))
