"""The RL core: one update for every policy, the GRU of chapters 5-8 and the language model of 10-11.

    rollout      Rollout (one update's episodes, padded to [B, T]) and Episode (one scored program)
    samplers     which tasks an update rolls out
    advantages   GAE, batch and group normalisation
    losses       PPO's clipped surrogate, REINFORCE's loss, the value loss, their diagnostics
    schedules    the learning rate over a run
    update       one update: `LossSettings` and `learn`, epochs of minibatches of one loss
    rl           the method table, the settings, and `Trainer.step`: collect -> advantages -> learn -> record

It imports neither policy package (`course_lib.gru`, `course_lib.lm`): a policy is anything with the
`update.Policy` interface, and a chapter swaps the policy, never the loop.
"""
