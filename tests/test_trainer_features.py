"""The trainer's everyday features: task files in JSONL/Parquet, kept checkpoints and resuming, training plots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from course_lib.gru import ppo_run
from course_lib.gru import trainer as tr
from course_lib.__main__ import main
from course_lib.tasks import TaskFormatError, load_task_records, load_tasks, parse_field_map, read_records
from course_lib.gru.ppo_run import run
from course_lib.gru.trainer import PPOConfig

FIXTURES = Path(__file__).parent / "fixtures"
FIELDS = "prompt=question,solution=answer,tests=checks,id=name,entry_point=entry,split=part"
TINY = dict(hidden_dim=16, embed_dim=8, pretrain_epochs=1, pretrain_batch_size=64, updates=4,
            episodes_per_update=8, group_size=2, minibatch_size=4, epochs=2, max_new_tokens=12,
            eval_every=2, save_every=1, teacher_batch_size=4, sandbox_timeout=2.0, explore_episodes=8)


def quiet(*a):
    pass


@pytest.mark.parametrize("name", ["tasks_sample.jsonl", "tasks_sample.parquet"])
def test_task_files_with_their_own_field_names(name):
    tasks = load_tasks(tasks_dir=FIXTURES / name, fields=FIELDS)
    assert [(t.id, t.split, t.novelty) for t in tasks] == [("double", "train", None), ("negate", "train", None),
                                                            ("triple", "val", "near")]
    assert tasks[0].tests == ("assert double(2) == 4", "assert double(-1) == -2")
    assert tasks[0].reference_program.endswith("return 2 * x\n") and tasks[0].family == "tasks_sample"
    assert [t.id for t in load_tasks("val", tasks_dir=FIXTURES / name, fields=FIELDS)] == ["triple"]


def test_task_file_errors_name_the_problem(tmp_path):
    with pytest.raises(TaskFormatError, match=r"missing \(rename the file's fields"):
        load_task_records(FIXTURES / "tasks_sample.jsonl")  # the file says question/answer, not prompt/solution
    with pytest.raises(TaskFormatError, match="ours=theirs"):
        parse_field_map("prompt:question")
    with pytest.raises(TaskFormatError, match="unknown field"):
        parse_field_map("question=prompt")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "f", "prompt": "def f():\n", "entry_point": "f", "solution": "    return 1\n",
                               "tests": ["assert f() == 1"], "split": "val", "novelty": "close"}) + "\n")
    with pytest.raises(TaskFormatError, match=r"bad.jsonl:1: field 'novelty'"):
        load_task_records(bad)
    with pytest.raises(TaskFormatError, match="unknown task file type"):
        read_records(_touch(tmp_path / "tasks.csv"))
    with pytest.raises(TaskFormatError, match="not a readable Parquet"):
        load_task_records(_touch(tmp_path / "broken.parquet"))


def _touch(path: Path) -> Path:
    path.write_text("not data\n")
    return path


def test_mbpp_shaped_parquet_loads_like_the_jsonl(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from course_lib.tasks import load_mbpp_jsonl
    rows = [json.loads(line) for line in (FIXTURES / "mbpp_sample.jsonl").read_text().splitlines() if line.strip()]
    for r in rows:
        r.pop("challenge_test_list", None)
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "mbpp.parquet")
    a, b = load_mbpp_jsonl(FIXTURES / "mbpp_sample.jsonl"), load_mbpp_jsonl(tmp_path / "mbpp.parquet")
    assert [(t.prompt, t.solution, t.tests) for t in a] == [(t.prompt, t.solution, t.tests) for t in b]
    # the general loader recognises MBPP-shaped records too
    assert [t.id for t in load_task_records(tmp_path / "mbpp.parquet", split="test")] == sorted(t.id for t in a)


def test_ppo_and_eval_commands_take_a_task_file(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["ppo", "--out", str(out), "--no-progress", "--tasks-dir", str(FIXTURES / "tasks_sample.parquet"),
                 "--task-fields", FIELDS, "--hidden-dim", "16", "--embed-dim", "8", "--pretrain-epochs", "1",
                 "--updates", "2", "--episodes-per-update", "8", "--group-size", "4", "--minibatch-size", "4",
                 "--max-new-tokens", "12", "--eval-every", "0", "--teacher-batch-size", "2"])
    assert code == 0, capsys.readouterr().out
    result = json.loads((out / tr.EVAL_FILE).read_text())
    assert {row["id"] for row in result["per_task"]} == {"double", "negate", "triple"}
    assert PPOConfig.load(out / tr.CONFIG_FILE).task_fields == FIELDS  # the snapshot holds the renames
    assert main(["eval", "--checkpoint", str(out / tr.POLICY_FILE), "--tasks", str(FIXTURES / "tasks_sample.jsonl"),
                 "--task-fields", FIELDS]) == 0
    assert "val_greedy_pass@1" in capsys.readouterr().out
    assert main(["eval", "--checkpoint", str(out / tr.POLICY_FILE), "--tasks",
                 str(FIXTURES / "tasks_sample.jsonl")]) == 2
    assert "rename the file's fields" in capsys.readouterr().out


def test_kept_checkpoints_and_resume_from_the_latest(tmp_path):
    full = tmp_path / "full"
    run(PPOConfig(**TINY, keep_checkpoints=2), full, progress=False, log=quiet)
    kept = sorted(p.name for p in (full / tr.CHECKPOINT_DIR).iterdir())
    assert kept == ["update_0003.pt", "update_0004.pt"]  # every save copied, only the last two kept

    cut = tmp_path / "cut"
    config = PPOConfig(**TINY, keep_checkpoints=2)
    assert run(config, cut, stop_after=3, progress=False, log=quiet) is None
    (cut / tr.STATE_FILE).write_bytes(b"truncated by a crash")  # the newest state is unreadable
    (cut / tr.CHECKPOINT_DIR / "update_0003.pt").unlink()          # and so is the newest kept copy
    assert ppo_run.latest_state(cut) == cut / tr.CHECKPOINT_DIR / "update_0002.pt"
    said = []
    run(config, cut, resume=True, progress=False, log=said.append)
    assert any("update_0002.pt" in line for line in said)
    strip = [{k: v for k, v in m.items() if k not in tr.TIMING_KEYS} for m in ppo_run.read_metrics(cut)]
    assert strip == [{k: v for k, v in m.items() if k not in tr.TIMING_KEYS} for m in ppo_run.read_metrics(full)]
    assert ppo_run.latest_state(tmp_path / "nothing") is None


def test_training_plot_is_written_at_the_end(tmp_path):
    run(PPOConfig(**TINY), tmp_path / "a", progress=False, log=quiet)
    png = tmp_path / "a" / tr.PLOT_FILE
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    run(PPOConfig(**TINY, plots=False), tmp_path / "b", progress=False, log=quiet)
    assert not (tmp_path / "b" / tr.PLOT_FILE).exists()


def test_plot_training_draws_every_panel():
    from course_lib.plots import PANELS, plot_training
    rows = [{"update": u, "reward_mean": 0.1 * u, "approx_kl": 0.01, "entropy": 1.0 - 0.1 * u, "clip_frac": 0.1,
             "explained_variance": 0.2 * u, "train_pass_rate_sampled": 0.5, "val_pass_rate_sampled": 0.0,
             **({"train_pass_rate_greedy": 0.9} if u == 2 else {})} for u in range(3)]
    fig = plot_training({"a": rows, "b": rows})
    assert [ax.get_title() for ax in fig.axes] == [name for _, name in PANELS]
    assert all(ax.lines for ax in fig.axes)
    with pytest.raises(ValueError, match="metrics rows"):
        plot_training("runs/ppo")


def test_diagram_box_and_arrow_draw_what_they_say():
    from matplotlib.figure import Figure

    from course_lib.plots import arrow, box
    ax = Figure().subplots()
    box(ax, 1.0, 2.0, "rollout", "#ddf4ff", w=2.0, h=0.5)
    arrow(ax, (1.0, 1.7), (1.0, 0.5), text="rewards")
    (rect,) = ax.patches
    assert rect.get_xy() == (0.0, 1.75) and rect.get_width() == 2.0 and rect.get_height() == 0.5
    labels = {t.get_text(): t.get_position() for t in ax.texts if t.get_text()}  # the arrow itself has no text
    assert labels == {"rollout": (1.0, 2.0), "rewards": (1.0, 1.1)}
    (drawn,) = [t for t in ax.texts if not t.get_text()]
    assert drawn.xy == (1.0, 0.5) and drawn.xyann == (1.0, 1.7)  # head at the end, tail at the start
    with pytest.raises(ValueError, match="width and height"):
        box(ax, 0, 0, "empty", w=0)


def test_both_task_samplers_refuse_test_tasks_and_resume_where_they_stopped():
    from course_lib.core.samplers import ShuffledPasses, TaskSampler
    from course_lib.tasks import load_tasks

    tasks = load_tasks()
    pool = [t for t in tasks if t.split in ("train", "val")]
    for make in (lambda ts: ShuffledPasses(ts, seed=3),
                 lambda ts: TaskSampler(ts, seed=3, unsolved_weight=1.0, min_weight=0.05)):
        with pytest.raises(ValueError, match="never trained on"):
            make(tasks)
        a, b = make(pool), make(pool)
        a.draw(5, per_task=2)
        b.load_state_dict(a.state_dict())
        assert [t.id for t in a.draw(7)] == [t.id for t in b.draw(7)]
    with pytest.raises(ValueError, match="more than once"):
        ShuffledPasses(pool + pool[:1], seed=0)
    passes = ShuffledPasses(pool, seed=0)
    first = [t.id for _ in range(len(pool) // 4) for t in passes.draw(4)]  # most of one pass, 4 at a time
    assert len(set(first)) == len(first) == len(pool) // 4 * 4  # no task twice before every task once
    step = passes.draw(len(pool) + 10)  # more than the pool: every task once
    assert sorted(t.id for t in step) == sorted(t.id for t in pool)
