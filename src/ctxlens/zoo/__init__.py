"""The zoo: matched tiny architectures, their corpus and trainer, and the reference models.

Importing ``ctxlens.zoo`` plugs it into ``ctxlens.lm`` by registering two model resolvers
(``ctxlens.lm.specs.RESOLVERS``), so ``lm`` never imports the zoo:

- ``zoo:NAME``: a trained zoo model (``ctxlens.zoo.registry``), with the training length of its
  recipe, or a built one such as ``zoo:random-llama``;
- ``ref:NAME``: a real reference model shipped in a PyPI package (``ctxlens.zoo.refs``).

``ctxlens.load``, the CLI and the runner import this package before loading a model.
"""

from __future__ import annotations

from ctxlens.lm.specs import RESOLVERS, Resolved
from ctxlens.zoo import refs, registry


def _zoo(name: str) -> Resolved:
    return Resolved(str(registry.zoo_path(name)), registry.train_length(name))


def _ref(name: str) -> Resolved:
    return Resolved(str(refs.ref_path(name)))


for _prefix, _resolver in (("zoo", _zoo), ("ref", _ref)):
    if _prefix not in RESOLVERS:
        RESOLVERS.add(_prefix, _resolver)
