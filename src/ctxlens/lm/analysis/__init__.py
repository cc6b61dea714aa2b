"""What the experiments compute on a loaded model's internals, behind the ``LM`` facade's methods:
captures of chosen residual, block and post-RoPE q/k slices in one early-stopped forward
(``capture``, on the shared hooks, recorder and stop of ``forward``), the per-layer q/k scan
(``qkscan``), per-token losses without full-vocabulary logits (``losses``), head masking
(``heads``), reading and overriding a model's RoPE (``rope``), and SelfExtend and RoPE pair
ablation inside the attention function (``selfextend``). Loading and the facade stay in
``ctxlens.lm``; these modules take a loaded model (or an ``LM``) and only read or edit it.
"""
