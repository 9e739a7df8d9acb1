"""The language model of chapters 9-11: a LLaMA-architecture coder (tiny, SmolLM2, DeepSeek-Coder),
LoRA and SFT, the fast sampler, evaluation with pass@k, the model as a policy, its Trainer and teachers."""
