"""The zoo plugs into ``ctxlens.lm`` through registered resolvers (DESIGN "Layers")."""

import json
import subprocess
import sys

import pytest

import ctxlens
from ctxlens.core.errors import CtxlensError
from ctxlens.findings import TRAIN_LENGTH
from ctxlens.lm.loading import RESOLVERS, resolve
from ctxlens.zoo import registry
from ctxlens.zoo.specs import RECIPE


def test_zoo_model_loads_with_its_training_length():
    lm = ctxlens.load("zoo:rope")  # the shipped model, or one a test in this session trained
    assert lm.name == "zoo:rope" and lm.train_length == registry.record("rope")["recipe"]["seq_len"]
    shipped = json.loads((registry.SHIPPED / "rope" / "zoo.json").read_text())
    assert shipped["recipe"]["seq_len"] == RECIPE.seq_len
    assert ctxlens.load("zoo:random-llama").train_length is None  # built, not trained: the config decides
    assert {"zoo", "ref"} <= set(RESOLVERS)


def test_unknown_prefix_is_one_sentence_with_a_suggestion():
    import ctxlens.zoo  # noqa: F401

    with pytest.raises(CtxlensError, match=r"^Unknown model prefix 'zooo:' in 'zooo:rope'; did you mean 'zoo:'\?"):
        resolve("zooo:rope")


def test_lm_alone_registers_no_resolver():
    code = ("import ctxlens.lm.loading as lo, sys; assert 'ctxlens.zoo' not in sys.modules; "
            "assert 'zoo' not in lo.RESOLVERS; import ctxlens.zoo; assert 'zoo' in lo.RESOLVERS")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_findings_default_training_length_is_the_zoo_recipes():
    assert TRAIN_LENGTH == RECIPE.seq_len
