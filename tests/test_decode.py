"""The fast rollout engine (course_lib.lm.decode) against the learner: the same ids greedily, the same
distribution on the same prefixes when sampling, and the sampler/learner correction of the RL core."""

from __future__ import annotations

import pytest
import torch

from course_lib.lm import decode, evaluation, llm, lm_policy, model_zoo, protocol
from course_lib.core import rl
from course_lib.lm.llm import encode_prompt
from course_lib.core.rollout import written_rollout

# grouped-query attention (4 query heads share 2 key heads), as SmolLM2 and DeepSeek-Coder's larger siblings
GQA = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
           num_key_value_heads=2, max_position_embeddings=1024)


@pytest.fixture(scope="module")
def gqa_policy(tasks):
    """A small Llama with grouped queries under a LoRA adapter whose B is not zero (so the adapter counts)."""
    texts = [t.prompt + t.solution for t in tasks if t.split == "train"]
    tokenizer = llm.train_tiny_tokenizer(texts, vocab_size=300)
    model = llm.build_tiny_coder(len(tokenizer), seed=1, **GQA)
    model = llm.add_lora(model, rank=4, alpha=8.0, targets=("q_proj", "k_proj", "v_proj", "o_proj", "up_proj"), seed=0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05, generator=torch.Generator().manual_seed(hash(name) % 1000))
    return model.eval(), tokenizer


@pytest.fixture(scope="module")
def prompts(tasks):
    return [t.prompt for t in tasks if t.split == "train"][:6]  # of different lengths: left padding is exercised


def learner_logits(model, prompt_ids, ids):
    """The learner's logits before each of ids, from one forward pass over prompt + ids (as LMActor scores)."""
    full = torch.tensor([list(prompt_ids) + list(ids)])
    with torch.no_grad():
        return model(input_ids=full).logits[0, len(prompt_ids) - 1:len(prompt_ids) - 1 + len(ids)].float()


def kl_per_token(sampler_logits, learner, temperature):
    s = torch.log_softmax(sampler_logits / temperature, -1)
    t = torch.log_softmax(learner / temperature, -1)
    return (s.exp() * (s - t)).sum(-1)


def test_greedy_ids_are_hugging_faces_through_lora_gqa_padding_and_stops(gqa_policy, prompts):
    model, tokenizer = gqa_policy
    for stops in ((), protocol.STOP_SEQUENCES):
        common = dict(temperature=0.0, max_new_tokens=24, stop_sequences=stops, batch_size=4)
        hf = evaluation.generate(model, tokenizer, prompts, engine="hf", **common)
        fast = evaluation.generate(model, tokenizer, prompts, engine="fast", **common)
        assert [g.ids for g in fast] == [g.ids for g in hf]
        assert [(g.text, g.finish, g.n_tokens) for g in fast] == [(g.text, g.finish, g.n_tokens) for g in hf]


def test_rows_that_end_leave_the_batch_without_changing_the_others(gqa_policy, prompts):
    """With <eos> set to a token the model writes early, rows end at different steps; each row's
    greedy answer is the one it writes alone."""
    model, tokenizer = gqa_policy
    rows = [encode_prompt(tokenizer, p) for p in prompts]
    alone = [decode.sample(model, [r], temperature=0.0, max_new_tokens=20, eos_id=-1)[0].ids for r in rows]
    eos = alone[0][3]  # the 4th token of the first row's answer: some rows meet it, at different steps
    together = decode.sample(model, rows, temperature=0.0, max_new_tokens=20, eos_id=eos)
    ended = [w for w in together if w.finish == "eos"]
    assert 0 < len(ended) < len(rows) or len({len(w.ids) for w in ended}) > 1
    for written, solo in zip(together, alone):
        cut = solo.index(eos) + 1 if eos in solo else len(solo)
        assert written.ids == solo[:cut]


def test_sampler_and_learner_agree_on_the_same_prefixes(gqa_policy, prompts):
    """The bound behind using the fast engine for rollouts: on every prefix it sampled, its
    next-token distribution is the learner's to float32 rounding (KL per token < 1e-6), and the
    log-probabilities it reports are the learner's scores of the same ids."""
    model, tokenizer = gqa_policy
    temperature = 0.8
    gens = evaluation.generate(model, tokenizer, prompts, n_samples=2, temperature=temperature, max_new_tokens=16,
                               stop_sequences=(), engine="fast", seed=3)
    snapshot = decode.Snapshot(model)
    for g in gens:
        prompt_ids = encode_prompt(tokenizer, prompts[g.prompt_index])
        forced = decode.forced_logits(snapshot, prompt_ids, g.ids)
        learner = learner_logits(model, prompt_ids, g.ids)
        assert kl_per_token(forced, learner, temperature).max() < 1e-6
        kl = decode.kl_to_learner(snapshot, model, prompt_ids, g.ids, temperature)  # the benchmarks' measure
        assert torch.allclose(kl, kl_per_token(forced, learner, temperature), atol=1e-7)
        scored = torch.log_softmax(learner / temperature, -1).gather(1, torch.tensor(g.ids)[:, None]).squeeze(1)
        assert torch.allclose(torch.tensor(g.logprobs), scored, atol=1e-4)


def test_sampling_is_seeded_and_draws_from_the_whole_distribution(gqa_policy, prompts):
    model, tokenizer = gqa_policy
    common = dict(n_samples=3, temperature=1.0, max_new_tokens=12, stop_sequences=(), engine="fast")
    first = evaluation.generate(model, tokenizer, prompts[:2], seed=5, **common)
    assert [g.ids for g in first] == [g.ids for g in evaluation.generate(model, tokenizer, prompts[:2], seed=5, **common)]
    assert [g.ids for g in first] != [g.ids for g in evaluation.generate(model, tokenizer, prompts[:2], seed=6, **common)]
    assert len({g.ids for g in first}) > 1  # samples of one prompt differ


def test_the_default_engine_samples_fast_on_a_cpu_and_decodes_greedily_with_hugging_face(gqa_policy):
    model, _ = gqa_policy
    assert evaluation.pick_engine(model, None, temperature=0.8) == "fast"
    assert evaluation.pick_engine(model, None, temperature=0.0) == "hf"
    with pytest.raises(ValueError, match="unknown engine"):
        evaluation.pick_engine(model, "vllm", temperature=0.8)
    not_llama = torch.nn.Linear(2, 2)
    assert not decode.is_llama(not_llama)


def test_on_smollm2_the_sampler_is_the_learner_to_rounding():
    """The same bound on the real model chapter 10 trains (9 query heads over 3 key heads, tied embeddings)."""
    model, tokenizer = model_zoo.load_model("smollm2-135m-instruct", "cpu")
    task_prompts = ["def add(a, b):\n    \"\"\"Return a + b.\"\"\"\n", "def is_even(n):\n"]
    gens = evaluation.generate(model, tokenizer, task_prompts, temperature=0.8, max_new_tokens=12,
                               stop_sequences=(), engine="fast")
    snapshot = decode.Snapshot(model)
    for g in gens:
        prompt_ids = encode_prompt(tokenizer, task_prompts[g.prompt_index])
        forced = decode.forced_logits(snapshot, prompt_ids, g.ids)
        assert kl_per_token(forced, learner_logits(model, prompt_ids, g.ids), 0.8).max() < 1e-5


def test_sampler_correction_by_hand():
    """w_t = min(pi_old / pi_sampler, cap) on real tokens, 0 on padding; sampler_kl = mean(log pi_s - log pi_old)."""
    ro = written_rollout(None, ["p", "p"], [[1, 2, 3], [4]], rewards=[1.0, 0.0], encode=lambda p: [0], pad_id=0)
    ro.logprobs = torch.tensor([[-1.0, -2.0, -0.5], [-1.0, 0.0, 0.0]])
    ro.sampler_logprobs = torch.tensor([[-1.0, -3.0, -0.4], [-0.5, 0.0, 0.0]])
    weights, stats = rl.sampler_correction(ro, cap=2.0)
    expected = torch.tensor([[1.0, 2.0, torch.exp(torch.tensor(-0.1))], [torch.exp(torch.tensor(-0.5)), 0.0, 0.0]])
    assert torch.allclose(weights, expected)
    assert stats["sampler_kl"] == pytest.approx((0.0 - 1.0 + 0.1 + 0.5) / 4)
    assert stats["is_capped_frac"] == pytest.approx(1 / 4)
    assert rl.sampler_correction(ro, cap=0.0)[0] is None  # off: measured, not applied
    ro.sampler_logprobs = None
    assert rl.sampler_correction(ro, cap=2.0) == (None, {})  # the learner sampled: nothing to correct


def test_an_rl_step_with_the_fast_engine_logs_a_negligible_sampler_kl(small_dir, tasks, monkeypatch):
    from course_lib.lm import llm_rl
    monkeypatch.setattr(llm_rl, "task_reports", lambda ts, codes, **kw: [
        type("R", (), {"passed": i % 2, "total": 1, "all_passed": bool(i % 2), "status": "ok"})()
        for i, _ in enumerate(codes)])
    model, tokenizer = lm_policy.load_policy(str(small_dir), "cpu", seed=0)
    pool = [t for t in tasks if t.split == "train"]
    config = llm_rl.RLConfig(steps=1, prompts_per_step=2, group_size=2, max_new_tokens=8, seed=0)
    trainer = llm_rl.LMTrainer(model, tokenizer, pool, config)
    row = trainer.step()
    assert abs(row["sampler_kl"]) < 1e-5 and row["sampler_max_abs_log_ratio"] < 1e-3
    assert row["is_weight_mean"] == pytest.approx(1.0, abs=1e-3)
    assert set(trainer.times[0]) == {"generate_s", "sandbox_s", "score_s", "learn_s"}


def test_the_bfloat16_engine_samples_near_the_learner_and_the_core_measures_how_near(gqa_policy, prompts):
    """fast-bf16 rounds weights and matmul inputs to bfloat16: its distribution moves a little from the
    learner's (measured here on the same prefixes), which is what `rl.sampler_correction` exists for."""
    model, tokenizer = gqa_policy
    gens = evaluation.generate(model, tokenizer, prompts, n_samples=2, temperature=0.8, max_new_tokens=16,
                               stop_sequences=(), engine="fast-bf16", seed=3)
    snapshot = decode.Snapshot(model, "bfloat16")
    kls = []
    for g in gens:
        prompt_ids = encode_prompt(tokenizer, prompts[g.prompt_index])
        kls.append(kl_per_token(decode.forced_logits(snapshot, prompt_ids, g.ids), learner_logits(model, prompt_ids, g.ids),
                                0.8))
    kl = torch.cat(kls)
    assert 0 < kl.mean() < 1e-3 and kl.max() < 1e-2
    with pytest.raises(ValueError, match="unknown precision"):
        decode.Snapshot(model, "float8")
