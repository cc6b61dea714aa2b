"""The shared steps of experiments, one copy each: windows and suffix states (``suffix``),
perturbations (``perturb``), the q/k scan (``qk``), RoPE options and transforms (``rope``,
``extrapolation``), needle probes (``passkey``, ``tasks``) and dominant-dimension statistics
(``dominant``). Experiments import these; these import ``tasks``, ``data``, ``metrics``, ``lm``
and ``core`` only.

The option groups experiments inherit their Config from, each field typed and documented
(``ctxlens.core.options``): ``source.SourceOptions`` and ``source.LengthSweepOptions``;
``suffix.SuffixOptions`` and ``suffix.GeometryOptions``; ``rope.RopeOptions``,
``rope.DominantOptions`` and ``rope.HeadOptions``; ``tasks.TaskOptions``."""
