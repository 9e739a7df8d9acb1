"""Tests for course_lib.tokenizers: the character tokenizer the environment and the GRU
rely on, BPE from scratch, and the Hugging Face BPE."""

import json
import subprocess
import sys

import pytest

from course_lib.tasks import Task, load_tasks
from course_lib.tokenizers import (BOS, EOS, PAD, BPETokenizer, CharTokenizer, TokenizerFileError,
                                   UnknownCharacterError, course_tokenizer, merge, pair_counts, pieces,
                                   tokenizer_texts, train_hf_bpe)

TASKS = load_tasks()
ALL_TEXTS = [s for t in TASKS for s in (t.prompt, t.solution, *t.tests)]


def task(id, split, prompt="def f():\n", solution="    return 1\n", tests=("assert f() == 1",)):
    return Task(id=id, prompt=prompt, entry_point="f", solution=solution, tests=tuple(tests),
                family="synthetic", split=split, novelty=None if split == "train" else "near")


@pytest.fixture(scope="module")
def tok():
    return course_tokenizer()


@pytest.fixture(scope="module")
def bpe():
    return BPETokenizer.train(tokenizer_texts(TASKS), 300)


# -----------------------------------------------------------------------------
# CharTokenizer

def test_special_ids_are_fixed(tok):
    assert (tok.pad_id, tok.bos_id, tok.eos_id) == (0, 1, 2)
    assert tok.vocab[:3] == [PAD, BOS, EOS] == [CharTokenizer.PAD, CharTokenizer.BOS, CharTokenizer.EOS]
    assert tok.stoi[EOS] == 2 and len(tok) == len(tok.vocab) == len(tok.stoi)


def test_vocab_is_sorted_and_independent_of_text_order():
    a = CharTokenizer.from_texts(["cab", "b"])
    assert a.vocab == [PAD, BOS, EOS, "a", "b", "c"]
    assert a == CharTokenizer.from_texts(["bc", "a"]) == CharTokenizer("abc")


def test_round_trip_every_text_of_the_task_set():
    everything = CharTokenizer.from_texts(ALL_TEXTS)
    for text in ALL_TEXTS:
        assert everything.decode(everything.encode(text)) == text


def test_course_tokenizer_reads_every_prompt_and_can_write_every_reference_solution(tok):
    # Every prompt must encode (the character-level PPO work log crashed on prompt characters); every reference
    # solution must be writable, or that task is unsolvable for a character-level policy.
    for t in TASKS:
        for text in (t.prompt, t.solution, t.program(t.solution)):
            assert tok.decode(tok.encode(text)) == text, t.id
    for t in load_tasks("train"):
        for text in t.tests:
            assert tok.decode(tok.encode(text)) == text


def test_bos_eos_and_decode_of_specials(tok):
    ids = tok.encode("ab", add_bos=True, add_eos=True)
    assert ids[0] == tok.bos_id and ids[-1] == tok.eos_id and len(ids) == 4
    assert tok.decode(ids) == "ab"
    assert tok.decode(ids + [tok.pad_id, tok.pad_id]) == "ab"
    assert tok.decode(ids, skip_special=False) == "<bos>ab<eos>"
    # decode does not stop at <eos>: whatever follows is decoded too
    assert tok.decode([tok.stoi["a"], tok.eos_id, tok.stoi["b"]]) == "ab"
    # the text "<eos>" is five characters, never the special token
    assert tok.eos_id not in tok.encode("<eos>")


def test_unknown_character_names_it_its_position_and_the_fix(tok):
    text = 'def f():\n    """返回 1"""\n'
    with pytest.raises(UnknownCharacterError) as info:
        tok.encode(text)
    message = str(info.value)
    assert "'返'" in message and "position 16" in message and "from_texts" in message
    assert info.value.char == "返" and info.value.position == 16
    assert isinstance(info.value, ValueError)
    fixed = CharTokenizer.from_texts(tokenizer_texts(TASKS) + [text])
    assert fixed.decode(fixed.encode(text)) == text


def test_token_ids_gives_an_action_alphabet(tok):
    ids = tok.token_ids("aab(")
    assert ids == [tok.stoi["a"], tok.stoi["b"], tok.stoi["("]]
    with pytest.raises(UnknownCharacterError):
        tok.token_ids("a€")


def test_decode_rejects_ids_outside_the_vocabulary(tok):
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([len(tok)])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([-1])


def test_constructor_rejects_strings_longer_than_one_character():
    with pytest.raises(ValueError, match="from_texts"):
        CharTokenizer(["ab", "c"])


def test_save_load_equality_and_fingerprint(tok, tmp_path):
    path = tmp_path / "tok.json"
    tok.save(path)
    data = json.loads(path.read_text())
    assert data["type"] == "char" and data["format_version"] == 1
    loaded = CharTokenizer.load(path)
    assert loaded == tok and loaded.vocab == tok.vocab
    assert loaded.fingerprint() == tok.fingerprint() == course_tokenizer().fingerprint()
    assert len(tok.fingerprint()) == 12
    # same size, different characters: the fingerprint tells them apart
    a, b = CharTokenizer("abc"), CharTokenizer("abd")
    assert len(a) == len(b) and a != b and a.fingerprint() != b.fingerprint()


def test_fingerprint_is_stable_across_python_processes(tok):
    code = "from course_lib.tokenizers import course_tokenizer; print(course_tokenizer().fingerprint())"
    for seed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={"PYTHONHASHSEED": seed, "PATH": ""})
        assert out.stdout.strip() == tok.fingerprint()


def test_loading_other_json_gives_a_clear_error(tmp_path):
    other = tmp_path / "config.json"
    other.write_text(json.dumps({"lr": 0.001}))
    with pytest.raises(TokenizerFileError, match="not a tokenizer file"):
        CharTokenizer.load(other)
    notjson = tmp_path / "notes.json"
    notjson.write_text("hello")
    with pytest.raises(TokenizerFileError, match="not JSON"):
        CharTokenizer.load(notjson)
    bpe_file = tmp_path / "bpe.json"
    BPETokenizer.train(["aaab"], 1).save(bpe_file)
    with pytest.raises(TokenizerFileError, match="BPETokenizer.load"):
        CharTokenizer.load(bpe_file)


def test_from_tasks_never_takes_characters_only_in_val_or_test_solutions():
    tasks = [
        task("t", "train", solution="    return 'a'\n", tests=("assert f() == 'a'",)),
        task("v", "val", prompt="def f():\n    'Q in the prompt'\n", solution="    return 'Q' + '@'\n",
             tests=("assert f() == 'Q@'",)),
        task("s", "test", solution="    return '#'\n", tests=("assert f() == '$'",)),
    ]
    tok = CharTokenizer.from_tasks(tasks)
    assert "@" not in tok.stoi and "#" not in tok.stoi     # only in val/test solutions
    assert "$" not in tok.stoi                             # only in a test task's tests
    assert "Q" in tok.stoi                                 # in a val solution, but also in its prompt
    assert "a" in tok.stoi and "'" in tok.stoi             # train solution and tests
    assert set(tok.vocab[3:]) == set("".join(tokenizer_texts(tasks)))
    with pytest.raises(ValueError):
        CharTokenizer.from_tasks([])


def test_course_tokenizer_is_from_tasks_of_the_whole_task_set(tok):
    assert tok == CharTokenizer.from_tasks(load_tasks())


# -----------------------------------------------------------------------------
# BPE from scratch

def test_pair_counts_and_merge_by_hand():
    # "aaabdaaabac": pairs aa:4, ab:2, ba:1, bd:1, da:1, ac:1 (counted by hand)
    ids = [ord(c) for c in "aaabdaaabac"]
    counts = pair_counts([ids])
    a, b = ord("a"), ord("b")
    assert counts[(a, a)] == 4 and counts[(a, b)] == 2 and counts.most_common(1)[0][0] == (a, a)
    assert merge(ids, (a, a), 0) == [0, a, b, ord("d"), 0, a, b, a, ord("c")]  # no overlaps


def test_first_merge_is_the_most_frequent_pair():
    # By hand: aa (4 times) -> Z a b d Z a b a c; then Za and ab tie at 2 and the
    # pair seen first wins (Za = "aaa") -> Y b d Y b a c; then Yb (2 times) = "aaab".
    tok = BPETokenizer.train(["aaabdaaabac"], 3)
    assert tok.vocab[len(tok.base):] == ["aa", "aaa", "aaab"]
    assert tok.encode("aaabdaaabac") == [len(tok.base) + 2, tok.base.stoi["d"], len(tok.base) + 2,
                                         tok.base.stoi["a"], tok.base.stoi["c"]]
    # pairs never span two texts: "ab", "ab" has no pair "ba", so one merge only
    two = BPETokenizer.train(["ab", "ab"], 5)
    assert two.vocab[len(two.base):] == ["ab"]


def test_first_merge_on_the_task_corpus_is_the_most_frequent_pair(bpe):
    texts = tokenizer_texts(TASKS)
    counts = pair_counts([bpe.base.encode(t) for t in texts])
    assert bpe.merges[0] == counts.most_common(1)[0][0]


def test_bpe_round_trips_every_text_the_base_can_encode(bpe):
    for t in TASKS:
        texts = [t.prompt, t.solution] + (list(t.tests) if t.split == "train" else [])
        for text in texts:
            ids = bpe.encode(text)
            assert bpe.decode(ids) == text
            assert max(ids) < len(bpe)


def test_training_stops_when_no_pair_repeats():
    tok = BPETokenizer.train(["abcd"], 10)
    assert tok.merges == []
    assert len(tok) == 3 + 4


def test_sequences_get_shorter_as_merges_grow(bpe):
    solutions = [t.solution for t in TASKS]
    totals = [sum(len(bpe.truncated(k).encode(s)) for s in solutions) for k in (0, 10, 50, 100, 300)]
    assert all(x > y for x, y in zip(totals, totals[1:])), totals
    assert totals[0] == sum(len(s) for s in solutions)  # zero merges = characters


def test_truncated_equals_training_fewer_merges(bpe):
    assert bpe.truncated(40) == BPETokenizer.train(tokenizer_texts(TASKS), 40)


def test_bpe_save_load(bpe, tmp_path):
    path = tmp_path / "bpe.json"
    bpe.save(path)
    loaded = BPETokenizer.load(path)
    assert loaded == bpe and loaded.fingerprint() == bpe.fingerprint() and len(loaded) == len(bpe)
    course_tokenizer().save(path)
    with pytest.raises(TokenizerFileError, match="CharTokenizer.load"):
        BPETokenizer.load(path)


def test_bpe_unknown_character_raises(bpe):
    with pytest.raises(UnknownCharacterError, match="'€'"):
        bpe.encode("x = '€'")


# -----------------------------------------------------------------------------
# Hugging Face tokenizers

@pytest.fixture(scope="module")
def hf():
    return train_hf_bpe(tokenizer_texts(TASKS), 500)


def test_hf_bpe_round_trips_any_text(hf):
    for text in ALL_TEXTS + ["x = '返回 €'\n\t\t  y\n\n"]:
        assert hf.decode(hf.encode(text).ids) == text


def test_hf_bpe_specials_and_size(hf):
    assert [hf.token_to_id(s) for s in (PAD, BOS, EOS)] == [0, 1, 2]
    assert 3 + 256 < hf.get_vocab_size() <= 500
    with pytest.raises(ValueError, match="at least 259"):
        train_hf_bpe(["a"], 100)


def test_hf_bpe_is_deterministic_and_compresses(hf):
    again = train_hf_bpe(tokenizer_texts(TASKS), 500)
    assert again.get_vocab() == hf.get_vocab()
    solutions = [t.solution for t in TASKS]
    assert sum(len(hf.encode(s).ids) for s in solutions) < 0.6 * sum(len(s) for s in solutions)


def test_pieces_show_the_text_of_each_token(tok, bpe, hf):
    text = "    return x\n"
    for t in (tok, bpe, hf):
        assert "".join(pieces(t, text)) == text
    assert pieces(tok, text) == list(text)


def test_module_name_does_not_shadow_the_library():
    # course_lib.tokenizers must import the real Hugging Face package inside train_hf_bpe.
    import tokenizers
    assert hasattr(tokenizers, "Tokenizer") and tokenizers.__name__ == "tokenizers"
