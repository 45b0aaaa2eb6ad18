"""Where rollouts are sampled: ``sampling.engine`` (``hf`` or ``vllm``).

``hf`` is ``models.policy.Policies`` itself (transformers ``generate`` with the peft adapters).
``vllm`` is :class:`models.engine.sampler.VllmSampler`: one vLLM engine holds the base model
once, in its own process and its own environment (``.venv-vllm``: vLLM pins a transformers and a
FastAPI older than this project's, see ``requirements-vllm.txt``), and samples for both roles
with each role's current adapter. Both implement ``pipeline.chains.Sampler``.

- ``worker``: the engine process (vLLM's environment; imports nothing from this project)
- ``client``: starts it, talks to it, and makes sure it never outlives the run
- ``sampler``: the ``Sampler`` over it, and how each adapter version reaches it
"""
