"""Model side of the pipeline, free of Prefect: stage prompts (``stages``, ``prompts``), parsing
of model output (``parsing``), policies with LoRA adapters (``policy``), batched sampling
(``generation``), memory-lean teacher-forced log-probs (``logprobs``), PPO maths (``ppo``) and
the tiny offline model builder (``tiny``). Import the submodules directly; this package imports
nothing, so ``import models.parsing`` stays free of torch."""
