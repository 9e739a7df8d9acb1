"""course_lib: the library of the course *Reinforcement learning for code generation*.

One module per idea, named in the book's vocabulary:

- ``tasks``      a task = prompt + entry point + reference solution + tests (chapter 1)
- ``sandbox``    running untrusted generated code safely and fast (chapter 1)
- ``tokenizers`` characters and byte-pair encoding (chapter 2)
- ``env``        the gymnasium code-generation environment, ``CodeGen-v0`` (chapter 3)
- ``models``, ``pretrain``, ``checkpoints``   the GRU policy and its pretraining (chapter 4)
- ``variants``   task variants for a pretraining experiment, held-out answers removed by behaviour (chapter 4)
- ``pg``         REINFORCE, baselines, gradient variance (chapter 5)
- ``ppo``        GAE, the clipped loss and its diagnostics (chapter 6)
- ``explore``    epsilon-greedy exploration near the greedy program (chapter 6)
- ``trainer``, ``baselines``   the PPO trainer and the best-of-N / expert-iteration baselines (chapter 6)
- ``rewards``    composable reward terms, reward specs, reward hacking (chapter 7)
- ``teacher``    teacher episodes, behaviour cloning and its fading schedule (chapter 8)
- ``plots``      the training plots every run writes
- ``llm``, ``evaluation``      a tiny LLaMA-architecture coder, LoRA, SFT; pass@k (chapter 9)
- ``llm_rl``     REINFORCE, PPO, GRPO and teacher-guided GRPO on LoRA (chapters 10-11)
- ``teacher_server``           an OpenAI-compatible stand-in teacher on loopback (chapter 11)
- ``reproduce``  the papermill batch that executes every chapter
- ``batch_engine``  the papermill engine it runs them with (``--engine course``): no lost replies, a per-cell limit
- ``colab``      the setup cell every notebook starts with
- ``progress``   progress bars that stay out of the book's saved outputs
- ``book_check``, ``glossary`` the rendered book checked in a browser; the glossary's back links

Importing the package is cheap: heavy modules (torch, transformers) load only
when the module that needs them is imported.
"""

__version__ = "0.1.0"


def _register_environments() -> None:
    """Make ``gymnasium.make("CodeGen-v0")`` work after ``import course_lib`` (chapter 3)."""
    from course_lib.env import register  # the package's own init: env imports the package's modules
    register()


_register_environments()
