"""The figures every PPO run is read by: one panel per diagnostic, from metrics.jsonl (chapters 6-8).

    plot_training(metrics, "runs/ppo/seed0/training.png")     # what `python -m course_lib ppo` writes at the end
    plot_training({"no teacher": m0, "both": m1})              # several runs, one colour each (a notebook)

The panels, and what a healthy run shows in each:

    reward              mean reward of the update's sampled episodes: should rise
    pass rate           sampled (thin) and greedy (dots) all-tests-passed rate per split
    approximate KL      how far one update moved the policy: small, below target_kl
    entropy             per-token entropy of the policy: falls slowly; a crash to 0 is a collapse
    clip fraction       share of tokens whose ratio was clipped: a few percent to ~20 %
    explained variance  how much of the returns the critic predicts: rises towards 1

And the boxes and arrows of the course's diagrams (chapter 6's training loop, chapter 9's decoder):

    box(ax, x, y, "rollout", "#ddf4ff"); arrow(ax, (x0, y0), (x1, y1))

And the figure of a slider (chapter 6), redrawn into an ipywidgets ``Output``:

    show_in(out)                                               # pyplot's current figure, or show_in(out, fig)
"""

from __future__ import annotations

from pathlib import Path

PANELS = (("reward_mean", "reward (mean of sampled episodes)"),
          ("pass_rate", "pass rate"),
          ("approx_kl", "approximate KL (nats)"),
          ("entropy", "entropy (nats / token)"),
          ("clip_frac", "clip fraction"),
          ("explained_variance", "explained variance"))
SPLIT_STYLE = {"train": "-", "val": "--"}


def plot_training(metrics, path=None, *, title: str | None = None, colors: dict | None = None):
    """Draw the six panels of one run (a list of metrics rows) or several ({label: rows}).

    path: save the figure there (PNG) and close it; else return it (a notebook shows it).
    Values missing from a row (e.g. greedy pass rates between evaluations) are skipped.
    """
    from matplotlib.ticker import MaxNLocator

    runs = metrics if isinstance(metrics, dict) else {"run": metrics}
    if not runs or not all(isinstance(rows, list) for rows in runs.values()):
        raise ValueError("plot_training expects a list of metrics rows (read_metrics) or a dict label -> rows")
    if path is not None:  # no pyplot: works without a display and leaves notebook figures alone
        from matplotlib.figure import Figure
        fig = Figure(figsize=(13, 6.5), layout="constrained")
        axes = fig.subplots(2, 3).ravel()
    else:
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(2, 3, figsize=(13, 6.5), layout="constrained")
        axes = axes.ravel()
    palette = ["C0", "C1", "C2", "C3", "C4", "C5", "C6", "C7"]
    for k, (label, rows) in enumerate(runs.items()):
        color = (colors or {}).get(label, palette[k % len(palette)])
        for ax, (key, name) in zip(axes, PANELS):
            if key == "pass_rate":
                for split, style in SPLIT_STYLE.items():
                    xs, ys = _series(rows, f"{split}_pass_rate_sampled")
                    if xs:
                        ax.plot(xs, ys, style, color=color, lw=1, alpha=0.6,
                                label=f"{label}: {split} sampled" if len(runs) == 1 else None)
                    xs, ys = _series(rows, f"{split}_pass_rate_greedy")
                    if xs:
                        ax.plot(xs, ys, style, color=color, marker="o", ms=4,
                                label=f"{label}: {split} greedy" if len(runs) == 1 else None)
            else:
                xs, ys = _series(rows, key)
                ax.plot(xs, ys, color=color, label=label)
            ax.set_title(name, fontsize=10)
            ax.set_xlabel("update")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[1].set_ylim(-0.03, 1.03)
    axes[1].set_ylabel("fraction of tasks (solid: train, dashed: val)")
    axes[0].set_ylabel("reward")
    (axes[1] if len(runs) == 1 else axes[0]).legend(fontsize=7)
    fig.suptitle(title or "PPO diagnostics per update")
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=90)
        return Path(path)
    return fig


def _series(rows, key):
    pairs = [(r["update"] + 1, r[key]) for r in rows if r.get(key) is not None]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def box(ax, x: float, y: float, text: str, color: str = "#ffffff", *, w: float = 2.6, h: float = 0.55,
        fontsize: float = 8.5):
    """A w x h box centred at (x, y) with its text: one step of a diagram."""
    import matplotlib.patches as patches

    if w <= 0 or h <= 0:
        raise ValueError(f"box {text!r}: width and height must be > 0, got w={w}, h={h}")
    ax.add_patch(patches.Rectangle((x - w / 2, y - h / 2), w, h, facecolor=color, edgecolor="black", lw=0.8))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)


def arrow(ax, start: tuple[float, float], end: tuple[float, float], *, text: str | None = None,
          color: str = "black", bend: float = 0.0, fontsize: float = 8):
    """An arrow from start to end (bend != 0 curves it), with an optional label at its middle."""
    style = f"arc3,rad={bend}" if bend else "arc3"
    ax.annotate("", xy=end, xytext=start,
                arrowprops=dict(arrowstyle="->", lw=1, color=color, connectionstyle=style))
    if text:
        ax.text((start[0] + end[0]) / 2, (start[1] + end[1]) / 2, text, ha="center", va="center",
                fontsize=fontsize, color=color, bbox=dict(facecolor="white", edgecolor="none", pad=1))


def show_in(output, fig=None) -> None:
    """Show `fig` (default: pyplot's current figure) in the ipywidgets ``Output`` `output`, in place
    of what it showed, and close the figure.

    The figure becomes the widget's state (its ``outputs``), sent by the kernel like a slider's
    value, instead of output captured by ``with output: plt.show()``. Captured output reaches a
    notebook runner (papermill, nbconvert, nbclient) as the cell's output, and the runner hands it
    back to the kernel on the socket where it waits for the cell's reply: a reply that arrives at
    that moment can go unnoticed until the cell's time limit, or forever without one
    (``benchmarks/widget_stress.py`` counts it). Set as state, the figure needs nothing from the
    runner, and Jupyter, VS Code and Colab draw it the same way.
    """
    import matplotlib.pyplot as plt
    from IPython import get_ipython

    fig = plt.gcf() if fig is None else fig
    shell = get_ipython()
    if shell is not None:  # the formats and options of the kernel's own figures (PNG, bbox_inches="tight")
        data, metadata = shell.display_formatter.format(fig)
    else:  # outside IPython: no figure formats, only the text form
        data, metadata = {"text/plain": repr(fig)}, {}
    plt.close(fig)
    output.outputs = ({"output_type": "display_data", "data": data, "metadata": metadata},)
