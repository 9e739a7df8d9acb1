"""Tokenizers: turning text into the ids a policy reads and writes (chapter 2).

A tokenizer is a two-way table between pieces of text (tokens) and integers
(ids). The course's policy writes code one token at a time, so the tokenizer
decides what one *action* is:

- ``CharTokenizer``  one token per character. Small vocabulary (a few dozen
  actions), long sequences. The course's GRU chapters use it.
- ``BPETokenizer``   byte-pair encoding from scratch: start from characters,
  repeatedly merge the most frequent adjacent pair into a new token. Bigger
  vocabulary, shorter sequences.
- ``train_hf_bpe``   the same idea with the Hugging Face ``tokenizers``
  library, the kind of tokenizer real code models (DeepSeek-Coder) use.

Every tokenizer here reserves ids 0, 1, 2 for the special tokens
``<pad>``, ``<bos>``, ``<eos>``.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from course_lib.tasks import load_tasks

FORMAT_VERSION = 1
PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"
SPECIAL_TOKENS = (PAD, BOS, EOS)


class UnknownCharacterError(ValueError):
    """A text holds a character that the tokenizer's vocabulary does not have."""

    def __init__(self, char: str, position: int, text: str, vocab_size: int):
        self.char, self.position, self.text = char, position, text
        start, end = max(0, position - 20), position + 21
        snippet = ("..." if start > 0 else "") + text[start:end] + ("..." if end < len(text) else "")
        super().__init__(
            f"character {char!r} (U+{ord(char):04X}) at position {position} is not in the vocabulary "
            f"({vocab_size} tokens), in the text {snippet!r}. Build the vocabulary from texts that "
            "include it: CharTokenizer.from_texts([...]) (or add the text to the tasks given to "
            "CharTokenizer.from_tasks).")


class TokenizerFileError(ValueError):
    """A file (or dict) is not a tokenizer saved by this module."""


def tokenizer_texts(tasks) -> list[str]:
    """The texts a task set's vocabulary is built from.

    - every prompt, of every split: the policy must *read* every prompt, so
      every prompt character needs an id (the character-level PPO work log crashed without this);
    - the solutions and test snippets of ``train`` tasks only: the policy *writes*
      code like them.
    Solutions of ``val`` and ``test`` tasks are the held-out answers. If their
    characters shaped the vocabulary (and so the action space), held-out answers
    would leak into training. Their characters are in the vocabulary only if some
    prompt or training text has them too.
    """
    tasks = list(tasks)
    if not tasks:
        raise ValueError("tokenizer_texts needs at least one task (got an empty list)")
    texts = [t.prompt for t in tasks]
    for t in tasks:
        if t.split == "train":
            texts.append(t.solution)
            texts.extend(t.tests)
    return texts


# -----------------------------------------------------------------------------
# what both tokenizers share: a JSON file, and a fingerprint of the vocabulary

class _SavedVocabulary:
    """save / load through the subclass's to_dict / from_dict, and the fingerprint of its `vocab`."""

    json_indent: int | None = None

    def save(self, path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), ensure_ascii=False, indent=self.json_indent) + "\n",
                              encoding="utf-8")

    @classmethod
    def load(cls, path):
        return cls.from_dict(_read_json(path), str(path))

    def fingerprint(self) -> str:
        """A short hash of the vocabulary: equal fingerprints mean every id means the same token."""
        return _fingerprint(self.vocab)


# -----------------------------------------------------------------------------
# characters

class CharTokenizer(_SavedVocabulary):
    """One token per character; the vocabulary is the characters seen in the data."""

    PAD, BOS, EOS = PAD, BOS, EOS
    pad_id, bos_id, eos_id = 0, 1, 2
    json_indent = 1

    def __init__(self, chars: Iterable[str]):
        chars = set(chars)
        bad = sorted(c for c in chars if not isinstance(c, str) or len(c) != 1)
        if bad:
            raise ValueError(f"CharTokenizer takes single characters, got {bad[:5]!r}; "
                             "to build from whole texts use CharTokenizer.from_texts([...])")
        # Sorted, so the same characters always get the same ids (no set-order surprises).
        self.vocab: list[str] = list(SPECIAL_TOKENS) + sorted(chars)
        self.stoi: dict[str, int] = {tok: i for i, tok in enumerate(self.vocab)}

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> CharTokenizer:
        """A vocabulary holding every character of every text."""
        return cls(c for text in texts for c in text)

    @classmethod
    def from_tasks(cls, tasks) -> CharTokenizer:
        """The vocabulary of a task set: see `tokenizer_texts` for which texts, and why."""
        return cls.from_texts(tokenizer_texts(tasks))

    def __len__(self) -> int:
        return len(self.vocab)

    def encode(self, text: str, *, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        """Text to ids. Special tokens are added only by the flags, never parsed from the text."""
        ids = [self.bos_id] if add_bos else []
        for position, char in enumerate(text):
            i = self.stoi.get(char)  # special tokens are multi-character, so never found here
            if i is None:
                raise UnknownCharacterError(char, position, text, len(self))
            ids.append(i)
        if add_eos:
            ids.append(self.eos_id)
        return ids

    def decode(self, ids: Iterable[int], *, skip_special: bool = True) -> str:
        """Ids to text. Does not stop at <eos>; drops <pad>/<bos>/<eos> when skip_special."""
        out = []
        for i in ids:
            i = _check_id(i, len(self))
            if i < len(SPECIAL_TOKENS) and skip_special:
                continue
            out.append(self.vocab[i])
        return "".join(out)

    def token_ids(self, chars: str) -> list[int]:
        """The id of each distinct character in chars, in order: an action alphabet."""
        return self.encode("".join(dict.fromkeys(chars)))

    # saving ---------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {"type": "char", "format_version": FORMAT_VERSION, "vocab": self.vocab}

    @classmethod
    def from_dict(cls, data: dict, where: str = "the data") -> CharTokenizer:
        vocab = _check_saved(data, "char", where)["vocab"]
        return cls(vocab[len(SPECIAL_TOKENS):])

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other.vocab == self.vocab

    def __hash__(self) -> int:
        return hash(tuple(self.vocab))

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={len(self)}, fingerprint={self.fingerprint()!r})"


def course_tokenizer() -> CharTokenizer:
    """The tokenizer the course uses: built from the whole task set by the rule of `tokenizer_texts`."""
    return CharTokenizer.from_tasks(load_tasks())


# -----------------------------------------------------------------------------
# byte-pair encoding, from scratch (characters as the base, as in minbpe but not bytes)

def pair_counts(sequences: Iterable[Sequence[int]]) -> Counter:
    """How often each adjacent pair of ids occurs. Pairs never span two texts."""
    counts = Counter()
    for ids in sequences:
        counts.update(zip(ids, ids[1:]))
    return counts


def merge(ids: Sequence[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace every occurrence of pair in ids (left to right, no overlaps) by new_id."""
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


class BPETokenizer(_SavedVocabulary):
    """Characters plus learned merges. Token id len(base) + k is the k-th merge."""

    def __init__(self, base: CharTokenizer, merges: Sequence[tuple[int, int]] = ()):
        self.base = base
        self.merges: list[tuple[int, int]] = [tuple(m) for m in merges]
        self.vocab: list[str] = list(base.vocab)
        for a, b in self.merges:
            if not (0 <= a < len(self.vocab) and 0 <= b < len(self.vocab)):
                raise ValueError(f"merge {(a, b)} refers to an id not defined before it")
            self.vocab.append(self.vocab[a] + self.vocab[b])
        # rank of each merge: encode applies the lowest-ranked (earliest-learned) one first
        self.ranks = {pair: k for k, pair in enumerate(self.merges)}

    @classmethod
    def train(cls, texts: Sequence[str], num_merges: int, *, base: CharTokenizer | None = None,
              min_count: int = 2) -> BPETokenizer:
        """Learn up to num_merges merges from texts, most frequent pair first.

        Stops early when no pair occurs min_count times: a pair seen once is a
        memorised string, not a pattern. Ties go to the pair seen first.
        """
        base = base or CharTokenizer.from_texts(texts)
        sequences = [base.encode(t) for t in texts]
        merges = []
        for k in range(num_merges):
            counts = pair_counts(sequences)
            if not counts:
                break
            pair, count = max(counts.items(), key=lambda item: item[1])  # first of the most frequent
            if count < min_count:
                break
            new_id = len(base) + k
            sequences = [merge(ids, pair, new_id) for ids in sequences]
            merges.append(pair)
        return cls(base, merges)

    def truncated(self, num_merges: int) -> BPETokenizer:
        """The tokenizer with only the first num_merges merges (what training that many would give)."""
        return BPETokenizer(self.base, self.merges[:num_merges])

    def __len__(self) -> int:
        return len(self.vocab)

    def encode(self, text: str) -> list[int]:
        ids = self.base.encode(text)  # unknown characters raise UnknownCharacterError here
        while len(ids) >= 2:
            # The merge learned earliest among the pairs present, as in training order.
            pair = min(zip(ids, ids[1:]), key=lambda p: self.ranks.get(p, float("inf")))
            if pair not in self.ranks:
                break
            ids = merge(ids, pair, len(self.base) + self.ranks[pair])
        return ids

    decode = CharTokenizer.decode  # ids to text is the same lookup in self.vocab for both tokenizers

    def to_dict(self) -> dict:
        return {"type": "bpe", "format_version": FORMAT_VERSION, "base": self.base.to_dict(),
                "merges": [list(m) for m in self.merges]}

    @classmethod
    def from_dict(cls, data: dict, where: str = "the data") -> BPETokenizer:
        data = _check_saved(data, "bpe", where)
        return cls(CharTokenizer.from_dict(data["base"], where), [tuple(m) for m in data["merges"]])

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other.base == self.base and other.merges == self.merges

    def __hash__(self) -> int:
        return hash((self.base, tuple(self.merges)))

    def __repr__(self) -> str:
        return f"BPETokenizer(vocab_size={len(self)}, merges={len(self.merges)})"


# -----------------------------------------------------------------------------
# the Hugging Face `tokenizers` library

def train_hf_bpe(texts: Iterable[str], vocab_size: int):
    """A byte-level BPE tokenizer trained with Hugging Face `tokenizers`; returns a `tokenizers.Tokenizer`.

    Byte-level, as GPT-2 and DeepSeek-Coder do: the base alphabet is all 256
    bytes, so any text encodes (no unknown characters) and decode gives back
    exactly the input, spaces and newlines included. A whitespace pre-tokenizer
    would drop the indentation Python depends on. The byte-level pre-tokenizer
    splits text into words and runs of spaces first, so no merge crosses a word
    boundary. Ids 0, 1, 2 are <pad>, <bos>, <eos>, as in the course's tokenizers.
    """
    import tokenizers as hf_tokenizers  # the library, not this module (imports are absolute)

    if not hasattr(hf_tokenizers, "Tokenizer"):  # only when Python runs from inside course_lib/
        raise ImportError(f"`import tokenizers` found {hf_tokenizers.__file__}, not the Hugging Face "
                          "library; run Python from another directory than course_lib/")

    minimum = len(SPECIAL_TOKENS) + 256
    if vocab_size < minimum:
        raise ValueError(f"vocab_size must be at least {minimum} (3 special tokens + 256 bytes), got {vocab_size}")
    tokenizer = hf_tokenizers.Tokenizer(hf_tokenizers.models.BPE())
    tokenizer.pre_tokenizer = hf_tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = hf_tokenizers.decoders.ByteLevel()
    trainer = hf_tokenizers.trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=2, special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=hf_tokenizers.pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return tokenizer


def id_mask(vocab_size: int, ids: Iterable[int] | None = None, *, barred: Iterable[int] = ()) -> np.ndarray:
    """Which of a vocabulary's ids may be written, as a boolean array: `ids` (all if None) less `barred`.
    The one mask of an action alphabet: the environment's (gymnasium's int8 `action_mask`) and the
    sampler's (a tensor that also bars the <pad> and <bos> markers) are both made from it."""
    mask = np.zeros(vocab_size, dtype=bool)
    if ids is None:
        mask[:] = True
    else:
        mask[np.asarray(list(ids), dtype=np.int64)] = True
    mask[np.asarray(list(barred), dtype=np.int64)] = False
    return mask


def pieces(tokenizer, text: str) -> list[str]:
    """The text of each token of text, for display: works for all three kinds of tokenizer."""
    if isinstance(tokenizer, (CharTokenizer, BPETokenizer)):
        return [tokenizer.vocab[i] for i in tokenizer.encode(text)]
    # A Hugging Face tokenizer shows bytes as symbols (a space is 'Ġ'); decoding one id gives the text.
    return [tokenizer.decode([i]) for i in tokenizer.encode(text).ids]


# -----------------------------------------------------------------------------
# plumbing

def _check_id(i, vocab_size: int) -> int:
    i = int(i)  # accepts ints, numpy ints and one-element tensors
    if not 0 <= i < vocab_size:
        raise ValueError(f"id {i} is outside the vocabulary (ids 0..{vocab_size - 1}); "
                         "was it produced with another tokenizer? Compare fingerprint() values")
    return i


def _fingerprint(vocab: list[str]) -> str:
    # sha256 of the JSON text, not hash(): hash() of a string changes between Python runs.
    return hashlib.sha256(json.dumps(vocab, ensure_ascii=True).encode()).hexdigest()[:12]


def _read_json(path) -> dict:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TokenizerFileError(f"{path} is not a tokenizer file: it is not JSON ({e}). "
                                 "Tokenizer files are written by CharTokenizer.save / BPETokenizer.save") from None


def _check_saved(data, expected_type: str, where: str) -> dict:
    loader = {"char": "CharTokenizer.load", "bpe": "BPETokenizer.load"}
    if not isinstance(data, dict) or "type" not in data:
        got = f"keys {sorted(data)[:8]}" if isinstance(data, dict) else type(data).__name__
        raise TokenizerFileError(f"{where} is not a tokenizer file: expected a JSON object with "
                                 f'"type": "{expected_type}" (written by {loader[expected_type].replace("load", "save")}), '
                                 f"got {got}")
    if data["type"] != expected_type:
        hint = f"; load it with {loader[data['type']]}" if data["type"] in loader else ""
        raise TokenizerFileError(f'{where} holds a tokenizer of type {data["type"]!r}, '
                                 f"not {expected_type!r}{hint}")
    if data.get("format_version") != FORMAT_VERSION:
        raise TokenizerFileError(f"{where}: format_version {data.get('format_version')!r} is not "
                                 f"supported (this course_lib reads version {FORMAT_VERSION})")
    if expected_type == "char":
        vocab = data.get("vocab")
        if not isinstance(vocab, list) or tuple(vocab[:len(SPECIAL_TOKENS)]) != SPECIAL_TOKENS:
            raise TokenizerFileError(f'{where}: "vocab" must be a list starting with {list(SPECIAL_TOKENS)}')
    return data
