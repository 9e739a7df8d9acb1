"""The GRU policy of chapters 3-8: the environment it acts in, the model, its pretraining, its Trainers.

Importing this package registers the gymnasium environment ``CodeGen-v0`` (chapter 3), so
``gymnasium.make("CodeGen-v0")`` works after ``import course_lib.gru``.
"""

from course_lib.gru.env import register

register()
