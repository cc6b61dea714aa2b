"""The zoo: matched tiny architectures, their corpus and trainer, and the reference models.

Two of its functions resolve model specs for ``ctxlens.lm``: ctxlens's ``pyproject.toml`` declares
them as entry points (``ctxlens.lm.specs.ENTRY_POINTS``), which ``lm`` loads on the first
``PREFIX:NAME`` it resolves, so neither ``lm`` nor any caller imports the zoo for them:

- ``zoo:NAME``: a trained zoo model (``ctxlens.zoo.registry.zoo_resolved``), with the training
  length of its recipe, or a built one such as ``zoo:random-llama``;
- ``ref:NAME``: a real reference model shipped in a PyPI package (``ctxlens.zoo.refs.ref_resolved``).
"""
