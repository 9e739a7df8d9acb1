"""LoRA reinforcement learning (chapter 10): rewards, advantages, losses, one update of each method,
the teacher's data rules, the HTTP teacher client and the command line.

The models are small LlamaForCausalLMs built in a temporary folder (as in test_llm.py);
generated code runs in the sandbox like everywhere else.
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from types import SimpleNamespace  # noqa: E402

from course_lib.lm import llm, llm_rl, llm_teacher, lm_policy, model_zoo, protocol  # noqa: E402
from course_lib.core import losses, rl
from course_lib.core.advantages import episode_advantages, group_advantages
from course_lib import sandbox
from course_lib.__main__ import main as cli  # noqa: E402
from course_lib.corpus import Example  # noqa: E402


@pytest.fixture(scope="module")
def sft_adapter(small_dir, tmp_path_factory, tasks):
    """A few SFT steps, so that a starting adapter exists to merge (as chapter 9's tiny_coder_sft)."""
    model, tokenizer = model_zoo.load_model(str(small_dir), "cpu")
    model = llm.add_lora(model, seed=0)
    llm.sft(model, tokenizer, llm.sft_examples([t for t in tasks if t.split == "train"]), steps=3, batch_size=4,
            progress=False)
    return llm.save_adapter(model, tmp_path_factory.mktemp("sft") / "adapter")


def every_other_passes(jobs, **settings):
    """A stand-in for the sandbox: sample 0, 2, 4, ... pass (so every method has something to learn)."""
    return [SimpleNamespace(all_passed=i % 2 == 0, passed=int(i % 2 == 0), total=1, status="passed")
            for i in range(len(jobs))]


def lora_and_frozen(model):
    named = dict(model.named_parameters())
    lora = {n: p.detach().clone() for n, p in named.items() if "lora_" in n}
    frozen = {n: p.detach().clone() for n, p in named.items() if "lora_" not in n}
    return lora, frozen


# --- reward and advantages, by hand ---------------------------------------------------------

def test_length_penalised_reward_is_seed_003s():
    r = llm_rl.length_penalised_reward([True, False, True], [100, 50, 0], alpha=0.01)
    assert torch.allclose(r, torch.tensor([1 - 0.01, -0.005, 1.0]))


def test_group_relative_advantages_by_hand():
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.5, 0.5])
    adv = group_advantages(rewards, 4, eps=0.0 + 1e-12)
    # group 1: mean 0.25, std sqrt(0.1875) = 0.4330; group 2: all equal -> 0
    expected = torch.tensor([0.75, -0.25, -0.25, -0.25]) / 0.1875 ** 0.5
    assert torch.allclose(adv[:4], expected, atol=1e-5)
    assert torch.all(adv[4:] == 0)
    assert torch.allclose(episode_advantages(rewards, "batch", normalise=False), rewards - rewards.mean())
    batch = episode_advantages(rewards, "batch")
    assert abs(batch.mean().item()) < 1e-6 and abs(batch.std(unbiased=False).item() - 1) < 1e-4
    assert torch.equal(episode_advantages(rewards, "group", group_size=4), group_advantages(rewards, 4))
    # a group that differs only by a length penalty: +-1 without a floor, small with one
    lengths_only = llm_rl.length_penalised_reward([False] * 4, [8, 20, 35, 64], alpha=0.01)
    assert group_advantages(lengths_only, 4).abs().max() > 1
    assert group_advantages(lengths_only, 4, min_std=0.1).abs().max() < 0.1
    assert torch.allclose(group_advantages(rewards, 4, min_std=0.1), adv, atol=1e-4)  # std 0.43 > floor
    with pytest.raises(ValueError, match="groups of 3"):
        group_advantages(rewards, 3)


def test_reinforce_loss_by_hand():
    logprobs = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    adv = torch.tensor([2.0, -1.0])
    # -(2 * (-3) + (-1) * (-0.5)) / 2 = -(-6 + 0.5) / 2 = 2.75
    assert abs(losses.reinforce_loss(logprobs, adv, mask=mask).item() - 2.75) < 1e-6


def test_token_logprobs_score_only_the_completion(small_dir):
    model, tokenizer = model_zoo.load_model(str(small_dir), "cpu")
    batch = llm.sft_batch(tokenizer, [Example("def f(x):\n", "    return x\n", ""), Example("def g():\n", "    pass\n", "")])
    logprobs, mask = lm_policy.token_logprobs(model, batch)
    _, n_prompt = llm.encode_example(tokenizer, "def f(x):\n", "    return x\n")
    ids, _ = llm.encode_example(tokenizer, "def f(x):\n", "    return x\n")
    assert mask[0].sum() == len(ids) - n_prompt  # completion + <eos>
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"][:1, :len(ids)]).logits[0]
    by_hand = sum(torch.log_softmax(logits[t - 1], -1)[ids[t]].item() for t in range(n_prompt, len(ids)))
    assert abs(logprobs[0].sum().item() - by_hand) < 1e-4
    assert torch.all(logprobs[mask == 0] == 0)


# --- the policy, its reference, one update of each method ---------------------------------------

def test_kl_to_the_reference_is_zero_while_the_adapter_is_the_reference(small_dir, sft_adapter):
    model, tokenizer = lm_policy.load_policy(str(small_dir), "cpu", init_adapter=sft_adapter, seed=0)
    batch = llm.sft_batch(tokenizer, [Example("def f(x):\n", "    return x + 1\n", "")])
    with torch.no_grad():
        new, mask = lm_policy.token_logprobs(model, batch)
        with model.disable_adapter():
            ref, _ = lm_policy.token_logprobs(model, batch)
        sft_model = llm.load_adapter(model_zoo.load_model(str(small_dir), "cpu")[0], sft_adapter)
        sft_logprobs, _ = lm_policy.token_logprobs(sft_model, batch)
    assert torch.allclose(ref, sft_logprobs, atol=1e-5)  # the reference is the SFT model (merged)
    _, stats = losses.ppo_loss(new, new, torch.ones_like(mask), mask, ref_logprobs=ref, kl_coef=1.0)
    assert abs(stats["kl_ref"]) < 1e-6
    with torch.no_grad():  # move the adapter away from zero: now the policy differs from the reference
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.add_(0.5)
        moved, _ = lm_policy.token_logprobs(model, batch)
    _, stats = losses.ppo_loss(moved, moved, torch.ones_like(mask), mask, ref_logprobs=ref, kl_coef=1.0)
    assert stats["kl_ref"] > 1e-4


@pytest.mark.parametrize("method", tuple(rl.METHODS))
def test_one_update_of_each_method_changes_only_lora_parameters(small_dir, sft_adapter, tasks, method, monkeypatch):
    # an untrained model's samples all fail at the same length: equal rewards, zero advantages, no update.
    # Here every other sample "passes", so each method has something to learn from.
    monkeypatch.setattr(sandbox, "run_tests_batch", every_other_passes)  # under sandbox.task_reports
    model, tokenizer = lm_policy.load_policy(str(small_dir), "cpu", init_adapter=sft_adapter, seed=0)
    lora, frozen = lora_and_frozen(model)
    pool = [t for t in tasks if t.split != "test"]
    history = llm_rl.train_rl(model, tokenizer, pool, method=method, steps=1, prompts_per_step=3,
                              group_size=1 if method in ("reinforce", "ppo") else 3, max_new_tokens=12,
                              progress=False)
    assert len(history) == 1 and {"reward", "pass_rate", "avg_len", "loss"} <= set(history[0])
    after_lora, after_frozen = lora_and_frozen(model)
    assert any(not torch.equal(lora[n], after_lora[n]) for n in lora)
    assert all(torch.equal(frozen[n], after_frozen[n]) for n in frozen)
    if method == "teacher-grpo":
        assert ("teacher_sft_loss" in history[0]) == (history[0]["teacher_examples"] > 0)
    assert ("value_loss" in history[0]) == (method == "ppo")  # PPO's critic: a value head, trained


CHAT_TEMPLATE = ("{% for m in messages %}<|user|>{{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def test_chat_style_rollouts_prompt_through_the_template_and_score_the_extracted_function(
        small_dir, tasks, monkeypatch):
    """An instruct model's RL step: chat prompts, the sandbox runs extract_function's code, the model
    learns from everything it wrote (prose included), and only the LoRA parameters move."""
    from course_lib.lm import evaluation

    seen: dict = {}

    def fake_generate(model, tokenizer, prompts, *, n_samples=1, **kwargs):
        seen["prompts"] = list(prompts)
        out = []
        for i, _ in enumerate(prompts):
            for j in range(n_samples):
                text = (f"Sure:\n```python\ndef {pool[i].entry_point}(*args):\n    return {j}\n```\n"
                        f"print({pool[i].entry_point}(1))\nThat is all.")
                ids = tuple(tokenizer(text, add_special_tokens=False)["input_ids"]) + (tokenizer.eos_token_id,)
                out.append(evaluation.Generation(i, text, protocol.extract_completion(text, ()), len(ids) - 1,
                                                 "eos", ids))
        return out

    def fake_run(jobs, **settings):
        seen["programs"] = [program for program, _ in jobs]
        return every_other_passes(jobs)

    monkeypatch.setattr(llm_rl, "generate", fake_generate)
    monkeypatch.setattr(sandbox, "run_tests_batch", fake_run)
    model, tokenizer = lm_policy.load_policy(str(small_dir), "cpu", seed=0)
    tokenizer.chat_template = CHAT_TEMPLATE
    pool = [t for t in tasks if t.split == "train"][:2]
    lora, frozen = lora_and_frozen(model)
    history = llm_rl.train_rl(model, tokenizer, pool, method="grpo", style="chat", steps=1, prompts_per_step=2,
                              group_size=2, progress=False)
    assert all(p.startswith("<|user|>Complete this Python function") and p.endswith("<|assistant|>")
               for p in seen["prompts"])
    assert len(seen["programs"]) == 4 and all("(*args):\n    return " in p and "print(" not in p and "Sure" not in p
                                              for p in seen["programs"])
    assert history[0]["nonzero_advantages"] == 4
    after_lora, after_frozen = lora_and_frozen(model)
    assert any(not torch.equal(lora[n], after_lora[n]) for n in lora)
    assert all(torch.equal(frozen[n], after_frozen[n]) for n in frozen)


def test_teacher_grpo_in_the_chat_style_learns_the_fenced_function_after_the_chat_prompt(small_dir, tasks):
    """The offline teacher answers a chat prompt as an instruct model does (the whole function in a fenced
    block), its answers are checked by the same extraction as the student's, and they join the loss."""
    model, tokenizer = lm_policy.load_policy(str(small_dir), "cpu", seed=0)
    tokenizer.chat_template = CHAT_TEMPLATE
    pool = [t for t in tasks if t.split != "test"]
    examples = llm_teacher.teacher_examples(llm_teacher.OfflineTeacher("chat"), pool, tokenizer=tokenizer)
    train = [t for t in pool if t.split == "train"]
    assert len(examples) == len(train)  # every train reference solution passes; no val task is asked
    first = next(t for t in train if examples[0].source == f"teacher:{t.id}")
    assert examples[0].prompt == protocol.chat_prompt(first, tokenizer)
    assert examples[0].target.startswith("```python\ndef ") and "<think>" not in examples[0].target
    assert protocol.extract_function(examples[0].target, first.entry_point).startswith(f"def {first.entry_point}")
    history = llm_rl.train_rl(model, tokenizer, train, method="teacher-grpo", style="chat", steps=1,
                              prompts_per_step=4, group_size=2, max_new_tokens=8, progress=False)
    assert history[0]["teacher_examples"] == 4  # one verified answer for each of the step's four train tasks
    assert "teacher_sft_loss" in history[0]


def test_evaluate_scores_chat_answers_by_their_extracted_function(small_dir, tasks, monkeypatch):
    """Sampled pass rates in the chat style: the template's prompt, extract_function's code in the sandbox."""
    from course_lib.lm import evaluation

    task = next(t for t in tasks if t.split == "train")
    right = f"```python\n{task.prompt}{task.solution}```\nThis function works."
    wrong = f"```python\n{task.prompt}    return None\n```"
    monkeypatch.setattr(evaluation, "generate", lambda m, tok, prompts, *, n_samples=1, temperature=0.0, **kw: [
        evaluation.Generation(0, right if (j % 2 == 0 or temperature == 0) else wrong, "", 10, "eos")
        for j in range(n_samples if temperature > 0 else 1)])
    _, tokenizer = model_zoo.load_model(str(small_dir), "cpu")
    tokenizer.chat_template = CHAT_TEMPLATE
    result = evaluation.evaluate(None, tokenizer, [task], n_samples=10, style="chat", ks=(1,))
    assert result["train_greedy_pass@1"] == 1.0 and result["train_pass@1"] == 0.5
    assert result["per_task"][0]["greedy_completion"].startswith("def ") and "works" not in \
        result["per_task"][0]["greedy_completion"]


def test_rl_refuses_test_tasks_and_bad_settings(small_dir, tasks):
    model, tokenizer = lm_policy.load_policy(str(small_dir), "cpu", seed=0)
    with pytest.raises(ValueError, match="held-out test task"):
        llm_rl.train_rl(model, tokenizer, tasks, method="ppo", steps=1)
    pool = [t for t in tasks if t.split == "train"]
    for bad, message in ((dict(method="dpo"), "unknown method"), (dict(method="grpo", group_size=1), "group_size"),
                         (dict(temperature=0.0), "must sample"), (dict(rollout_splits=("test",)), "never trained on"),
                         (dict(style="poem"), "prompt style"), (dict(style="chat"), "chat style needs the tokenizer")):
        with pytest.raises(ValueError, match=message):
            llm_rl.train_rl(model, tokenizer, pool, steps=1, **bad)
    with pytest.raises(FileNotFoundError, match="no adapter"):
        lm_policy.load_policy(str(small_dir), "cpu", init_adapter=small_dir)


# --- the teacher ---------------------------------------------------------------------------------

class RecordingTeacher:
    """Answers every task with its reference solution (a teacher that would leak if asked about val/test)."""
    style = "completion"

    def __init__(self):
        self.asked = []

    def solutions(self, tasks):
        self.asked += [t.split for t in tasks]
        return [t.solution for t in tasks]


def test_rl_with_humaneval_in_the_pool_never_trains_on_its_test_problems():
    """`llm --rollout-humaneval` adds HumanEval's training problems; its 33 test problems are refused."""
    from course_lib.tasks import load_humaneval

    train, test = load_humaneval("train"), load_humaneval("test")
    assert (len(train), len(test)) == (131, 33) and not {t.id for t in train} & {t.id for t in test}
    with pytest.raises(ValueError, match="held-out test task"):
        llm_rl.train_rl(None, None, train + test[:1], method="grpo")


def test_teacher_data_never_holds_val_or_test_solutions(tasks):
    offline = llm_teacher.OfflineTeacher().solutions(tasks)
    assert all((s is None) == (t.split != "train") for t, s in zip(tasks, offline))
    examples = llm_teacher.teacher_examples(llm_teacher.OfflineTeacher(), tasks)
    train_ids = {t.id for t in tasks if t.split == "train"}
    assert {e.source.split(":", 1)[1] for e in examples} <= train_ids and len(examples) > 0.9 * len(train_ids)
    held_out = [t.solution.strip() for t in tasks if t.split != "train"]
    assert not any(s in e.target for e in examples for s in held_out)

    recording = RecordingTeacher()
    llm_teacher.teacher_examples(recording, tasks, verify=False)
    assert set(recording.asked) == {"train"}  # never asked about a val or test task

    class Leaky(RecordingTeacher):  # answers train prompts with a val solution
        def solutions(self, tasks_):
            val = next(t for t in tasks if t.split == "val")
            return [val.solution for _ in tasks_]
    with pytest.raises(ValueError, match="val/test solutions"):
        llm_teacher.teacher_examples(Leaky(), tasks, verify=False)

    instruct = llm_teacher.OfflineTeacher("instruct").solutions([t for t in tasks if t.split == "train"][:1])[0]
    assert instruct.startswith("<think>") and "```python\n" in instruct


def test_http_teacher_speaks_the_openai_api(tasks):
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append((self.path, body))
            text = "    return a + b\n\ndef junk():\n    pass\n"
            choice = ({"message": {"role": "assistant", "content": "<think>add</think>\n```python\n" + text + "```"}}
                      if self.path.endswith("chat/completions") else {"text": text})
            data = json.dumps({"choices": [choice]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        task = next(t for t in tasks if t.split == "train")
        teacher = llm_teacher.HTTPTeacher(base, "teacher-model")
        assert teacher.url == base + "/v1/completions"
        assert teacher.solutions([task]) == ["    return a + b\n"]  # cut at the stop sequence
        assert seen[-1][1]["prompt"] == task.prompt and seen[-1][1]["model"] == "teacher-model"
        chat = llm_teacher.HTTPTeacher(base + "/v1", "teacher-model", style="instruct")
        assert chat.url == base + "/v1/chat/completions"
        answer = chat.solutions([task])[0]
        assert answer.startswith("<think>") and seen[-1][1]["messages"][0]["role"] == "user"
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(ConnectionError, match="no teacher answers"):
        llm_teacher.HTTPTeacher(base, "m", timeout=2).solutions([task])


# --- the command line ----------------------------------------------------------------------------

def test_command_line_rl_writes_metrics_adapter_and_eval(small_dir, sft_adapter, tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "course_lib", "llm", "--method", "teacher-grpo", "--model-name", str(small_dir),
           "--init-adapter", str(sft_adapter), "--out", str(out), "--steps", "2", "--batch-size", "2",
           "--group-size", "2", "--n-samples", "10", "--max-new-tokens", "8", "--no-humaneval", "--no-progress",
           "--threads", "1"]
    result = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2] and all("reward" in m for m in metrics)
    report = json.loads((out / "eval.json").read_text())
    for split, count in (("train", 46), ("val", 15), ("test", 15)):
        assert 0 <= report[f"{split}_pass@1"] <= 1 and report[f"{split}_tasks"] == count
    assert report["method"] == "teacher-grpo" and report["rl_config"]["group_size"] == 2
    assert "avg_gen_len" in report and "val_greedy_pass@1" in report
    assert (out / "adapter" / "adapter_config.json").exists()
    assert (out / "rl_state.pt").exists()  # what --resume continues from


@pytest.mark.parametrize("options, message", [
    (["--method", "grpo", "--group-size", "1"], "group_size must be >= 2"),
    (["--method", "ppo", "--teacher-url", "http://localhost:1"], "serve --method teacher-grpo"),
    (["--method", "reinforce", "--kl-coef", "0.05"], "reinforce's loss has no KL term"),
    (["--method", "teacher-grpo", "--teacher-url", "http://localhost:1"], "go together"),
    (["--method", "reinforce", "--rollout-splits", "train", "test"], "never trained on"),
    (["--method", "reinforce", "--no-prompt-mask"], "SFT option"),
    (["--method", "ppo", "--init-adapter", "/nonexistent"], "holds no adapter"),
    (["--method", "teacher-grpo", "--style", "chat", "--teacher-url", "http://localhost:1", "--teacher-model", "m"],
     "use the offline teacher"),
    (["--method", "grpo", "--style", "chat", "--init-adapter", "none"], "the chat style needs the tokenizer"),
    (["--method", "sft", "--resume"], "--resume continues an RL run"),
])
def test_command_line_rejects_bad_options(small_dir, tmp_path, capsys, options, message):
    code = cli(["llm", *options, "--model-name", str(small_dir), "--out", str(tmp_path / "x"), "--no-progress"])
    assert code == 2 and message in capsys.readouterr().out
