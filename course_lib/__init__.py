"""course_lib: the library of the course *Reinforcement learning for code generation*.

Packages by role, so the file tree is the architecture:

- ``tasks``, ``sandbox``      the task set, and running untrusted generated code safely (chapter 1)
- ``tokenizers``, ``rewards`` text to ids (chapter 2); a program's reward from its test report (chapters 3, 7)
- ``core``      the RL core, the same for every policy: rollouts, advantages, losses, the method table,
                the update and ``Trainer.step``, task samplers, schedules (chapters 5-6, 10). It imports
                neither policy package.
- ``gru``       the GRU policy: the gymnasium environment, the model and its pretraining, its actor and
                Trainers (REINFORCE, PPO with teacher terms), exploration, baselines (chapters 3-8)
- ``lm``        the language model: architecture, loading by name, LoRA and SFT, the fast sampler,
                evaluation, its actor and value head, its Trainer and teachers, TRL (chapters 9-11)
- ``cli``       the commands ``python -m course_lib ppo | eval | llm``
- ``config``, ``runs``, ``stats``, ``plots``, ``progress``   settings, run files, statistics, figures, progress bars

Importing the package is cheap: heavy modules (torch, transformers, gymnasium) load only when the module
that needs them is imported. ``import course_lib.gru`` registers the environment ``CodeGen-v0``.
"""

__version__ = "0.1.0"
