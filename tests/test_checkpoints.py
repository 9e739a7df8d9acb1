"""Checkpoints carry their config and vocabulary; mismatches are errors that explain themselves."""

from __future__ import annotations

import pytest
import torch

from course_lib.gru.checkpoints import CheckpointFormatError, load_checkpoint, save_checkpoint
from course_lib.runs import CheckpointMismatchError, check_record_made_from, file_sha256
from course_lib.gru.models import GRUConfig, GRUPolicy
from course_lib.tokenizers import CharTokenizer


@pytest.fixture
def saved(tmp_path):
    tok = CharTokenizer.from_texts(["abcdef xyz\n"])
    torch.manual_seed(0)
    model = GRUPolicy(GRUConfig(len(tok), embed_dim=8, hidden_dim=16))
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, model, tok, extra={"regime": "memorise", "alphabet": [1, 2, 3]})
    return path, model, tok


def test_round_trip_gives_identical_logits(saved):
    path, model, tok = saved
    loaded, loaded_tok, extra = load_checkpoint(path)
    assert loaded.config == model.config and loaded_tok == tok
    assert extra == {"regime": "memorise", "alphabet": [1, 2, 3]}
    tokens = torch.tensor([tok.encode("abc xyz", add_bos=True)])
    for a, b in zip(model(tokens), loaded(tokens)):
        assert torch.equal(a, b)
    # passing the same tokenizer is fine
    assert load_checkpoint(path, tokenizer=CharTokenizer.from_texts(["abcdef xyz\n"]))[1] == tok


def test_a_tokenizer_from_other_data_is_refused_with_what_differs(saved):
    path, _, _ = saved
    other = CharTokenizer.from_texts(["abcdef xyz\n", "ABC"])  # the character-level PPO work log: a vocabulary from another dataset
    with pytest.raises(CheckpointMismatchError) as info:
        load_checkpoint(path, tokenizer=other)
    message = str(info.value)
    assert isinstance(info.value, ValueError)
    assert "14 tokens" in message and "17 tokens" in message  # the sizes
    assert "first different id" in message and "'A'" in message  # where ids start to mean other things
    assert "only in yours: 'ABC'" in message
    assert "Fix:" in message and "tokenizer stored in the checkpoint" in message


def test_a_model_of_another_config_is_refused_naming_the_fields(saved):
    path, _, tok = saved
    wrong = GRUPolicy(GRUConfig(len(tok), embed_dim=8, hidden_dim=32))
    with pytest.raises(CheckpointMismatchError, match=r"hidden_dim is 16 in the checkpoint but 32 in yours"):
        load_checkpoint(path, model=wrong)
    right = GRUPolicy(GRUConfig(len(tok), embed_dim=8, hidden_dim=16))
    assert load_checkpoint(path, model=right)[0] is right


def test_a_bare_state_dict_is_not_guessed_from(saved, tmp_path):
    """The character-level PPO work log saved only weights and inferred the sizes from tensor shapes."""
    _, model, _ = saved
    bare = tmp_path / "bare.pt"
    torch.save(model.state_dict(), bare)
    with pytest.raises(CheckpointFormatError, match="missing.*config.*tensor shapes"):
        load_checkpoint(bare)


def test_renamed_or_reshaped_weights_are_refused(saved, tmp_path):
    path, _, _ = saved
    ckpt = torch.load(path, weights_only=True)
    ckpt["state_dict"]["head.weight"] = ckpt["state_dict"].pop("policy_head.weight")  # the character-level PPO work log's renaming
    bad = tmp_path / "renamed.pt"
    torch.save(ckpt, bad)
    with pytest.raises(CheckpointMismatchError, match="missing policy_head.weight.*unexpected head.weight"):
        load_checkpoint(bad)


def test_not_a_checkpoint_and_other_versions_are_format_errors(saved, tmp_path):
    path, _, _ = saved
    junk = tmp_path / "junk.pt"
    junk.write_text("hello")
    with pytest.raises(CheckpointFormatError, match="is not a course checkpoint .a text file, beginning 'hello'.: "
                                                    "expected a file written by course_lib.gru.checkpoints.save_checkpoint"):
        load_checkpoint(junk)
    ckpt = torch.load(path, weights_only=True)
    ckpt["format_version"] = 99
    newer = tmp_path / "newer.pt"
    torch.save(ckpt, newer)
    with pytest.raises(CheckpointFormatError, match="format_version 99"):
        load_checkpoint(newer)


def test_a_record_made_from_another_copy_of_the_checkpoint_is_refused(saved, tmp_path):
    path = saved[0]
    record = {"pretrained_sha256": file_sha256(path)}
    assert check_record_made_from(record, path, record_name="data/x.json", remake="python benchmarks/x.py")
    other = tmp_path / "other.pt"
    other.write_bytes(path.read_bytes() + b"\0")  # one byte more: another checkpoint
    with pytest.raises(CheckpointMismatchError, match=r"data/x\.json was made from .*python benchmarks/x\.py"):
        check_record_made_from(record, other, record_name="data/x.json", remake="python benchmarks/x.py")
    with pytest.raises(CheckpointMismatchError, match="an unrecorded checkpoint"):
        check_record_made_from({}, path, record_name="data/x.json", remake="python benchmarks/x.py")
    with pytest.warns(UserWarning, match="another model"):  # a reader's notebook: told, not stopped
        assert not check_record_made_from(record, other, record_name="x", remake="y", strict=False)


def test_a_record_made_from_several_files_names_them_and_checks_each(tmp_path):
    """A tiny-coder record starts from a model and its adapter: either changed means another start."""
    model, adapter = tmp_path / "model.safetensors", tmp_path / "adapter_model.safetensors"
    model.write_bytes(b"weights")
    adapter.write_bytes(b"adapter")
    record = {"pretrained_sha256": file_sha256([model, adapter])}
    assert file_sha256(model) != record["pretrained_sha256"] != file_sha256(adapter)
    assert check_record_made_from(record, [model, adapter], record_name="x", remake="y")
    assert file_sha256([adapter, model]) != record["pretrained_sha256"]  # the order is part of the start
    adapter.write_bytes(b"adapter, trained again")
    with pytest.raises(CheckpointMismatchError, match=r"model\.safetensors \+ adapter_model\.safetensors as it is now"):
        check_record_made_from(record, [model, adapter], record_name="x", remake="y")
