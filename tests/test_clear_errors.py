"""The two mistakes a new user makes first get a sentence, not a traceback: a model name that does not
exist (the course's names, a folder and the hub all tried) and a file that is not a course checkpoint."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from course_lib.lm import model_zoo  # noqa: E402
from course_lib.__main__ import main  # noqa: E402
from course_lib.gru.checkpoints import CheckpointFormatError, load_checkpoint  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


# --- a model name that is not a model --------------------------------------------------------------

def _hub_error(cls):
    """An instance of one of huggingface_hub's errors without an HTTP response behind it."""
    error = cls.__new__(cls)
    Exception.__init__(error, f"{cls.__name__} (made by the test)")
    return error


def _hub_raises(monkeypatch, error, *, offline=False):
    import huggingface_hub
    from huggingface_hub import constants

    def download(*args, **kwargs):
        raise error
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    monkeypatch.setattr(constants, "is_offline_mode", lambda: offline)


def test_an_unknown_hub_name_with_no_hub_says_what_it_tried_and_how_to_fix_it(monkeypatch, tmp_path):
    from huggingface_hub import errors

    monkeypatch.chdir(tmp_path)
    _hub_raises(monkeypatch, errors.LocalEntryNotFoundError("no connection"))
    with pytest.raises(model_zoo.ModelNotFoundError) as info:
        model_zoo.load_model("no-such/model", "cpu")
    message = str(info.value)
    assert message.startswith("unknown model 'no-such/model'; tried three things")
    assert all(name in message for name in model_zoo.MODEL_NAMES)                       # (1) the course's names
    assert f"there is no folder {tmp_path / 'no-such' / 'model'}" in message             # (2) a folder
    assert "https://huggingface.co could not be reached from here" in message            # (3) the hub
    assert "config.json" in message and "a machine that reaches huggingface.co" in message  # the fix


def test_the_hub_answering_no_such_model_and_offline_mode_are_told_apart(monkeypatch):
    from huggingface_hub import errors

    _hub_raises(monkeypatch, _hub_error(errors.RepositoryNotFoundError))
    with pytest.raises(model_zoo.ModelNotFoundError, match="the Hugging Face hub: it answered that it has no model"):
        model_zoo.resolve_model_name("no-such/model")
    _hub_raises(monkeypatch, _hub_error(errors.GatedRepoError))
    with pytest.raises(model_zoo.ModelNotFoundError, match="accepted its terms"):
        model_zoo.resolve_model_name("no-such/model")
    _hub_raises(monkeypatch, errors.LocalEntryNotFoundError("offline"), offline=True)
    with pytest.raises(model_zoo.ModelNotFoundError, match="not asked, as HF_HUB_OFFLINE is set"):
        model_zoo.resolve_model_name("no-such/model")
    # a course's name that lives on the hub (DeepSeek-Coder) names the models that run here instead
    with pytest.raises(model_zoo.ModelNotFoundError, match="comes from the Hugging Face hub.*'tiny'.*smollm2"):
        model_zoo.resolve_model_name(model_zoo.DEEPSEEK_CODER_1_3B)


def test_names_that_are_neither_hub_names_nor_folders_are_not_sent_to_the_hub(monkeypatch, tmp_path):
    _hub_raises(monkeypatch, AssertionError("the hub must not be asked"))
    for name in ("smollm2", str(tmp_path / "missing"), "./missing"):
        with pytest.raises(model_zoo.ModelNotFoundError, match="no folder .*missing|no folder .*smollm2") as info:
            model_zoo.resolve_model_name(name)
        assert "the Hugging Face hub: not asked" in str(info.value)
    assert model_zoo.resolve_model_name(str(tmp_path)) == str(tmp_path)  # a folder is not checked against the hub


def test_the_llm_command_prints_the_message_not_a_traceback(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"),
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run([sys.executable, "-m", "course_lib", "llm", "--model-name", "no-such/model",
                             "--out", str(tmp_path / "run"), "--no-progress"],
                            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and "OSError" not in result.stdout + result.stderr
    assert "error: unknown model 'no-such/model'; tried three things" in result.stdout
    assert "HF_HUB_OFFLINE" in result.stdout and model_zoo.SMOLLM2 in result.stdout


# --- a file that is not a checkpoint -----------------------------------------------------------------

NOT_CHECKPOINTS = {
    "notes.txt": (lambda p: p.write_text("hello, not weights\n"), r"a text file, beginning 'hello, not weights'"),
    "empty.pt": (lambda p: p.write_bytes(b""), "the file is empty"),
    "random.bin": (lambda p: p.write_bytes(bytes(range(7, 200))), "a binary file whose first bytes"),
    "list.pt": (lambda p: torch.save([1, 2, 3], p), "torch.load reads a list from it, not a dict"),
    "code.pkl": (lambda p: p.write_bytes(pickle.dumps(print, protocol=2)), "a pickle that holds more than tensors"),
    "folder": (lambda p: p.mkdir(), "it is a folder"),
}


@pytest.mark.parametrize("name", sorted(NOT_CHECKPOINTS))
def test_a_file_that_is_not_a_checkpoint_says_so_and_what_was_expected(tmp_path, name):
    make, why = NOT_CHECKPOINTS[name]
    path = tmp_path / name
    make(path)
    with pytest.raises(CheckpointFormatError) as info:
        load_checkpoint(path)
    message = str(info.value)
    assert message.startswith(f"{path} is not a course checkpoint (")
    assert why in message
    assert "): expected a file written by course_lib.gru.checkpoints.save_checkpoint" in message
    assert "Unsupported operand" not in message and "Weights only load failed" not in message


@pytest.mark.parametrize("content", ["hello, not weights\n", ""])
def test_the_eval_command_prints_the_message_not_torchs(tmp_path, capsys, content):
    path = tmp_path / "policy.pt"
    path.write_text(content)
    assert main(["eval", "--checkpoint", str(path)]) == 2
    out = capsys.readouterr().out
    assert out.startswith(f"error: {path} is not a course checkpoint (")
    assert "expected a file written by course_lib.gru.checkpoints.save_checkpoint" in out
    assert "Unsupported operand" not in out
