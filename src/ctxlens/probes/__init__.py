"""The shared steps of experiments, one copy each.

- ``windows``: token windows cut from a source once, at the longest length a run asks for;
- ``suffix``: suffix positions, suffix states and ACCS over perturbations (``perturb``);
- ``perplexity``: suffix perplexity and whole-window losses;
- ``visible``: loss and last-token features with exactly l tokens visible;
- ``qk``: the q/k scan of ``LM.scan_qk`` with RoPE pair contributions; ``dominant`` and
  ``positional_heads``: dominant dimension vs distance and the heads it ranks;
- ``rope`` and ``extrapolation``: the RoPE experiments' options, inputs and transforms;
- ``passkey``: the built-in needle probes (zoo corpus, classic, RULER's wording); ``tasks``: task
  prompts, decoding and scored rows;
- ``throughput``: a few-second prefill / decode probe of a loaded model (the runner's and the
  profile's time estimates).

Layer selection is ``ctxlens.core.options.Layers``, resolved by ``LM.layer_indices``.
Experiments import these; these import ``tasks``, ``data``, ``metrics``, ``lm`` and ``core``
only, never ``experiments``.

The option groups experiments inherit their Config from, each field typed and documented
(``ctxlens.core.options``): ``source.SourceOptions`` and ``source.LengthSweepOptions``;
``suffix.SuffixOptions`` and ``suffix.GeometryOptions``; ``rope.RopeOptions``,
``rope.DominantOptions`` and ``rope.HeadOptions``; ``tasks.TaskOptions``.
"""
