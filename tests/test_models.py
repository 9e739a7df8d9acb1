"""The GRU policy, generation and pretraining (chapter 4)."""

from __future__ import annotations

import pytest
import torch

from course_lib.gru.models import GRUConfig, GRUPolicy, generate, generate_ids
from course_lib.corpus import (IGNORE_INDEX, Example, drop_leaks, find_leaks, held_out_solutions,
                                       task_examples)
from course_lib.corpus import REGIMES, pretraining_texts, stdlib_functions
from course_lib.gru.pretrain import evaluate_loss, make_batch, pretrain, token_loss
from course_lib.tasks import load_tasks
from course_lib.tokenizers import CharTokenizer, course_tokenizer


@pytest.fixture(autouse=True)
def one_thread():
    """Small matrices: one thread is fastest and does not fight other processes for the cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tok():
    return CharTokenizer.from_texts(["abcdefghij xyz\n()=+"])


def tiny_model(tok, seed=0, hidden=16):
    torch.manual_seed(seed)
    return GRUPolicy(GRUConfig(len(tok), embed_dim=8, hidden_dim=hidden))


# --- the model -------------------------------------------------------------------

def test_forward_shapes_and_step_matches_forward(tok):
    model = tiny_model(tok)
    tokens = torch.tensor([tok.encode("abc", add_bos=True), tok.encode("xyz", add_bos=True)])
    logits, values, hidden = model(tokens)
    assert logits.shape == (2, 4, len(tok)) and values.shape == (2, 4) and hidden.shape == (1, 2, 16)
    h = None
    for t in range(4):  # incremental decoding gives what the whole-sequence pass gives
        step_logits, step_values, h = model.step(tokens[:, t], h)
        torch.testing.assert_close(step_logits, logits[:, t])
        torch.testing.assert_close(step_values, values[:, t])


def test_prefill_handles_prompts_of_different_lengths(tok):
    model = tiny_model(tok)
    seqs = [tok.encode("abcdefg", add_bos=True), tok.encode("x", add_bos=True)]
    logits, _, hidden = model.prefill(seqs)
    for i, s in enumerate(seqs):
        alone, _, h = model(torch.tensor([s]))
        torch.testing.assert_close(logits[i], alone[0, -1])
        torch.testing.assert_close(hidden[:, i], h[:, 0])


# --- generation ------------------------------------------------------------------

def test_generate_returns_completions_only_and_respects_max_new_tokens(tok):
    model = tiny_model(tok)
    with torch.no_grad():
        model.policy_head.bias[tok.encode("a")[0]] = 50.0  # 'a' always wins: never stops by itself
    out = generate(model, tok, ["xyz", "hij\n"], max_new_tokens=7, greedy=True)
    assert out == ["a" * 7, "a" * 7]  # no prompt in front, exactly max_new_tokens long


def test_generate_stops_each_row_at_eos_and_drops_it(tok):
    model = tiny_model(tok)
    with torch.no_grad():
        model.policy_head.bias[tok.eos_id] = 50.0
    ids = generate_ids(model, tok, ["ab", "abcdef"], max_new_tokens=10, greedy=True)
    assert ids == [[tok.eos_id], [tok.eos_id]]
    assert generate(model, tok, ["ab"], max_new_tokens=10, greedy=True) == [""]


def test_generate_never_writes_pad_or_bos_and_keeps_to_allowed_ids(tok):
    model = tiny_model(tok)
    with torch.no_grad():
        model.policy_head.bias[tok.pad_id] = model.policy_head.bias[tok.bos_id] = 50.0
    allowed = tok.token_ids("ab") + [tok.eos_id]
    g = torch.Generator().manual_seed(0)
    ids = generate_ids(model, tok, ["x"] * 8, max_new_tokens=20, temperature=2.0, allowed_ids=allowed, generator=g)
    assert {i for row in ids for i in row} <= set(allowed)


def test_greedy_is_deterministic_and_batched_equals_one_by_one(tok):
    model = tiny_model(tok, hidden=32)
    prompts = ["a", "abcdefghij", "xyz\n", "(a+b)"]
    batched = generate(model, tok, prompts, max_new_tokens=12, greedy=True)
    assert batched == generate(model, tok, prompts, max_new_tokens=12, greedy=True)
    assert batched == [generate(model, tok, [p], max_new_tokens=12, greedy=True)[0] for p in prompts]


def test_sampling_is_repeatable_with_a_seeded_generator(tok):
    model = tiny_model(tok)

    def sample(seed):
        return generate(model, tok, ["ab"] * 4, max_new_tokens=15, temperature=1.5,
                        generator=torch.Generator().manual_seed(seed))

    assert sample(1) == sample(1)
    assert sample(1) != sample(2)
    with pytest.raises(ValueError, match="temperature"):
        generate(model, tok, ["ab"], max_new_tokens=3, temperature=-1.0)


# --- the loss --------------------------------------------------------------------

def test_make_batch_marks_only_target_tokens_and_eos(tok):
    inputs, targets, mask = make_batch(tok, [Example("ab", "c", "t1"), Example("abcd", "xyz", "t2")])
    # row 0: <bos> a b | c <eos>, then padding
    assert inputs[0].tolist() == [tok.bos_id] + tok.encode("abc") + [tok.pad_id] * 4
    assert targets[0, :4].tolist() == tok.encode("abc") + [tok.eos_id]
    assert mask[0].tolist() == [False, False, True, True, False, False, False, False]
    assert mask[1].tolist() == [False] * 4 + [True] * 4
    assert not mask[inputs == tok.pad_id].any()  # padding never counts


def test_loss_counts_solution_tokens_only(tok):
    inputs, targets, mask = make_batch(tok, [Example("ab", "c", "t1"), Example("abcd", "xyz", "t2")])
    logits = torch.randn(*targets.shape, len(tok), generator=torch.Generator().manual_seed(0))
    base = token_loss(logits, targets, mask)
    other = tok.encode("j")[0]
    for i, t in zip(*torch.nonzero(~mask, as_tuple=True)):  # a prompt or padding position
        changed = targets.clone()
        changed[i, t] = other
        assert torch.equal(token_loss(logits, changed, mask), base)
    changed = targets.clone()
    changed[1, 5] = other  # a solution position
    assert not torch.allclose(token_loss(logits, changed, mask), base)
    # it is the mean cross-entropy over the marked positions, nothing else
    expected = torch.nn.functional.cross_entropy(logits[mask], targets[mask])
    torch.testing.assert_close(base, expected)
    assert IGNORE_INDEX < 0


def test_padding_does_not_change_the_loss(tok):
    """A short example padded next to a long one scores exactly what it scores alone."""
    model = tiny_model(tok)
    short, long = Example("ab", "c", "s"), Example("abcdefghij", "xyz xyz", "l")

    def loss_and_count(examples):
        inputs, targets, mask = make_batch(tok, examples)
        return token_loss(model(inputs)[0], targets, mask), int(mask.sum())

    (ls, ns), (ll, nl), (lb, nb) = loss_and_count([short]), loss_and_count([long]), loss_and_count([short, long])
    assert nb == ns + nl
    torch.testing.assert_close(lb, (ls * ns + ll * nl) / nb)


# --- the data --------------------------------------------------------------------

@pytest.mark.parametrize("regime", REGIMES)
def test_no_val_or_test_solution_in_pretraining_data(regime):
    tasks = load_tasks()
    data = pretraining_texts(regime, tasks=tasks, tokenizer=course_tokenizer())
    held_out = held_out_solutions(tasks)
    assert len(held_out) == sum(t.split != "train" for t in tasks) > 0
    text = [e.prompt + e.target for e in data]
    for task_id, solution in held_out.items():
        assert not any(solution in t for t in text), f"{task_id}'s solution is in the {regime} data"
    assert {e.source for e in data if e.source.startswith("train:")} == \
        {f"train:{t.id}" for t in tasks if t.split == "train"}
    tok = course_tokenizer()
    for e in data:  # everything encodes with the course's tokenizer: no new characters
        tok.encode(e.prompt + e.target)


def test_broad_regime_adds_stdlib_functions_shaped_like_tasks():
    data = pretraining_texts("broad")
    stdlib = [e for e in data if e.source.startswith("stdlib:")]
    assert len(stdlib) >= 50
    for e in stdlib:
        assert e.prompt.startswith("def ") and e.prompt.endswith('"""\n')
        assert e.target.startswith("    ") and e.target.endswith("\n") and len(e.target) <= 150
        compile(e.prompt + e.target, e.source, "exec")


def test_a_leaked_solution_is_filtered_out():
    tasks = load_tasks()
    victim = next(t for t in tasks if t.split == "test")
    leak = Example("def f(a, b):\n", "    x = 1\n" + victim.solution, "stdlib:made_up.f")
    clean = Example("def g(a):\n", "    return a\n", "stdlib:made_up.g")
    assert find_leaks([leak, clean], tasks) == [("stdlib:made_up.f", victim.id)]
    assert drop_leaks([leak, clean], tasks) == [clean]


def test_held_out_tasks_are_refused_as_training_pairs():
    with pytest.raises(ValueError, match="only train tasks"):
        task_examples(load_tasks("val"))


def test_stdlib_functions_only_use_the_vocabulary():
    tok = course_tokenizer()
    vocab = set(tok.vocab)
    assert all(set(e.prompt + e.target) <= vocab for e in stdlib_functions(tok))


# --- training --------------------------------------------------------------------

def test_a_short_pretraining_run_lowers_the_loss():
    tok = course_tokenizer()
    examples = pretraining_texts("memorise", tokenizer=tok)[:6]
    model = tiny_model(tok, hidden=64)
    before = evaluate_loss(model, tok, examples)
    losses = pretrain(model, tok, examples, epochs=40, lr=1e-2, batch_size=6, seed=0, progress=False)
    after = evaluate_loss(model, tok, examples)
    assert len(losses) == 40
    assert after < 0.5 * before and losses[-1] < losses[0]


def test_pretraining_is_repeatable():
    tok = course_tokenizer()
    examples = pretraining_texts("memorise", tokenizer=tok)[:4]
    runs = []
    for _ in range(2):
        model = tiny_model(tok, hidden=32)
        runs.append(pretrain(model, tok, examples, epochs=3, lr=1e-2, batch_size=2, seed=3, progress=False))
    assert runs[0] == runs[1]


def test_decode_writes_the_same_ids_whether_finished_rows_stay_or_leave(tok):
    """models.decode, the GRU's writing loop: greedily, a finished row leaving the batch changes no other row's ids;
    on_token sees only running rows when they leave, and every row when they stay."""
    from course_lib.gru.models import decode

    model = tiny_model(tok, hidden=32)
    with torch.no_grad():
        model.policy_head.bias[tok.eos_id] += 0.4  # some rows stop early (at steps 2 and 6), some run to the limit
    prompts = [tok.encode(p, add_bos=True) for p in ["a", "abcdefghij", "xyz\n", "(a+b)", "j"]]
    seen = {True: [], False: []}
    out = {}
    for drop in (True, False):
        out[drop] = decode(model, prompts, lambda logits: logits.argmax(-1), eos_id=tok.eos_id, max_new_tokens=9,
                           drop_finished=drop, on_token=lambda t, rows, *_: seen[drop].append(len(rows)))
    assert out[True].ids == out[False].ids
    assert any(row[-1] == tok.eos_id for row in out[True].ids) and any(len(row) == 9 for row in out[True].ids)
    assert set(seen[False]) == {len(prompts)} and seen[True][-1] < len(prompts)


def test_a_rollout_bootstraps_only_rows_cut_by_the_limit():
    """collect_rollout(bootstrap_truncated=True) gives V(state after the cut) to cut-off rows only: a row that wrote
    <eos> at the very last step ended, and keeps 0."""
    from course_lib.gru.actor import collect_rollout
    from course_lib.gru.models import next_token_mask
    from course_lib.tasks import load_tasks

    tok = course_tokenizer()
    tasks = load_tasks("train")[:6]
    allowed = next_token_mask(len(tok), tok, sorted(tok.token_ids("ab1+ \nreturnx()") + [tok.eos_id]))
    found = False
    for seed in range(20):
        torch.manual_seed(seed)
        model = tiny_model(tok, hidden=16)
        with torch.no_grad():
            model.value_head.bias.fill_(0.5)  # a critic that is never exactly 0
        ro = collect_rollout(model, tok, tasks * 2, allowed=allowed, temperature=1.0, max_new_tokens=4,
                             generator=torch.Generator().manual_seed(seed), bootstrap_truncated=True)
        truncated = torch.tensor([e.truncated for e in ro.episodes])
        assert (ro.bootstrap[~truncated] == 0).all() and (ro.bootstrap[truncated] != 0).all()
        found |= any(e.terminated and len(e.actions) == 4 for e in ro.episodes)
    assert found, "no rollout ended with <eos> exactly at the limit: the case this test is for did not occur"
