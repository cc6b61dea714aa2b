"""Every task sweep generates through the same path on a tiny random model of every family
(the long-sequence paper runs transformers, SSMs and hybrids alike): one scored row per sample, budget respected."""

import pytest

from ctxlens.experiments import get_experiment, make_config
from ctxlens.lm.families import FAMILIES
from ctxlens.zoo.tokenizer import byte_tokenizer
from tests.conftest import build_model

SWEEPS = {
    "ruler": {"tasks": ["niah_single_1", "vt"], "lengths": [900]},
    "niah-depth": {"lengths": [400], "depths": [0, 100]},
    "niah-format": {"lengths": [400], "depths": [50], "haystacks": ["repeat"], "values": ["numbers"]},
    "visible-fraction": {"tasks": ["vt"], "max_length": 900, "fractions": [0.5, 1.0]},
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_task_sweeps_generate_on_every_family(family):
    from ctxlens.lm import from_model

    tok = byte_tokenizer()
    lm = from_model(build_model(family, vocab_size=len(tok), eos_token_id=tok.eos_token_id,
                                pad_token_id=tok.eos_token_id), tok, name=family)
    for name, options in SWEEPS.items():
        exp = get_experiment(name)
        config = make_config(exp.Config, {"n_samples": 1, "max_new_tokens": 4, "cache": False, **options})
        cache = {}
        rows = [r for unit in exp.plan(config) for r in exp.run(lm, config, unit, cache)]
        assert rows and all(r.get("flag") is None for r in rows), (name, rows[:2])
        assert all(0.0 <= r["score"] <= 100.0 for r in rows), name
