"""Typed experiment options: coercion from CLI strings and YAML values, choices and ranges checked by
their types with one wording, and help text for every option."""

from dataclasses import dataclass, field
from typing import Annotated, Literal, get_args

import pytest

from ctxlens import CtxlensError
from ctxlens.core.options import (
    Fraction,
    NonEmpty,
    NonNegativeInt,
    Percent,
    PositiveFloat,
    PositiveFraction,
    PositiveInt,
    at_least,
    option_help,
)
from ctxlens.experiments import experiments, get_experiment
from ctxlens.experiments.base import make_config
from ctxlens.probes.rope import DominantOptions, HeadOptions, RopeOptions
from ctxlens.probes.source import LengthSweepOptions, SourceOptions
from ctxlens.probes.suffix import GeometryOptions, SuffixOptions
from ctxlens.probes.tasks import TaskOptions


@dataclass
class Cfg:
    lengths: list[int] = field(default_factory=lambda: [1])
    scale: float = 1.0
    name: str = "x"
    flag: bool = False
    limit: int | None = None


def test_strings_and_yaml_values_coerce_alike():
    a = make_config(Cfg, {"lengths": "16,32", "scale": "0.5", "flag": "true", "limit": "3"})
    b = make_config(Cfg, {"lengths": [16, 32], "scale": 0.5, "flag": True, "limit": 3})
    assert a == b == Cfg([16, 32], 0.5, "x", True, 3)
    assert make_config(Cfg, {"lengths": 8}).lengths == [8]


@pytest.mark.parametrize("options,message", [
    ({"lenghts": "1"}, "Did you mean 'lengths'"),
    ({"lengths": "a,b"}, "must be int"),
    ({"scale": True}, "must be float"),
    ({"scale": "nan"}, "must be a finite number"),  # no option takes nan or inf: no file ctxlens writes holds them
    ({"scale": float("inf")}, "must be a finite number"),
    ({"flag": "maybe"}, "must be bool"),
    ({"lengths": [1.5]}, "must be int"),
    ({"name": ["a"]}, "must be str"),
])
def test_bad_options(options, message):
    with pytest.raises(CtxlensError, match=message):
        make_config(Cfg, options)


# -- choices and ranges expressed in types -----------------------------------------------------


@dataclass
class Typed:
    mode: Literal["abs", "positive", "negative"] = "abs"
    modes: Annotated[list[Literal["loss", "attention"]], NonEmpty] = field(default_factory=lambda: ["loss"])
    n: PositiveInt = 1
    gap: NonNegativeInt = 0
    lengths: list[PositiveInt] = field(default_factory=lambda: [8])
    lr: PositiveFloat = 1e-3
    fractions: list[PositiveFraction] = field(default_factory=lambda: [0.5])
    boundary: Fraction = 0.5
    depths: list[Percent] = field(default_factory=lambda: [50.0])
    limit: PositiveInt | None = None
    samples: Annotated[int, at_least(2)] = 2


def test_typed_options_accept_what_they_allow():
    config = make_config(Typed, {"mode": "negative", "modes": "loss,attention", "n": "3", "gap": 0, "lengths": "4,8",
                                 "lr": "0.5", "fractions": [1], "boundary": 0, "depths": "0,100", "limit": None,
                                 "samples": 2})
    assert config == Typed("negative", ["loss", "attention"], 3, 0, [4, 8], 0.5, [1.0], 0.0, [0.0, 100.0], None, 2)


@pytest.mark.parametrize("options,message", [
    ({"mode": "ab"}, "Option 'mode' must be one of abs, positive, negative, got 'ab'; did you mean 'abs'?"),
    ({"mode": 3}, "Option 'mode' must be one of abs, positive, negative, got '3'; fix its value."),
    ({"mode": ["abs"]}, "Option 'mode' must be one of abs, positive, negative, got ['abs']; fix its value."),
    ({"modes": "loss,mlp"}, "Option 'modes' must be one of loss, attention, got 'mlp'; fix its value."),
    ({"modes": []}, "Option 'modes' must be a non-empty list, got []; fix its value."),
    ({"n": 0}, "Option 'n' must be positive, got 0; fix its value."),
    ({"n": "1.5"}, "Option 'n' must be int, got '1.5'; fix its value."),
    ({"gap": -1}, "Option 'gap' must be 0 or more, got -1; fix its value."),
    ({"lengths": "16,-4"}, "Option 'lengths' must be positive, got -4; fix its value."),
    ({"lr": "inf"}, "Option 'lr' must be positive, got inf; fix its value."),
    ({"lr": "nan"}, "Option 'lr' must be positive, got nan; fix its value."),
    ({"fractions": "0,0.5"}, "Option 'fractions' must be in (0, 1], got 0.0; fix its value."),
    ({"boundary": 1.5}, "Option 'boundary' must be in [0, 1], got 1.5; fix its value."),
    ({"depths": [101]}, "Option 'depths' must be in [0, 100], got 101.0; fix its value."),
    ({"limit": 0}, "Option 'limit' must be positive, got 0; fix its value."),
    ({"samples": 1}, "Option 'samples' must be at least 2, got 1; fix its value."),
])
def test_typed_options_reject_with_one_uniform_sentence(options, message):
    with pytest.raises(CtxlensError) as err:
        make_config(Typed, options)
    assert str(err.value) == message


def test_experiments_word_choices_and_ranges_alike():
    cases = {
        ("rope-dims", "top_k", 0): "Option 'top_k' must be in [1, 100,000], got 0; fix its value.",
        ("rope-dims", "n_pairs", 0): "Option 'n_pairs' must be in [1, 100,000], got 0; fix its value.",
        ("head-masking", "passkey_style", "clasic"):
            "Option 'passkey_style' must be one of corpus, classic, ruler, got 'clasic'; did you mean 'classic'?",
        ("positional-heads", "alpha", 1): "Option 'alpha' must be in (0, 1), got 1.0; fix its value.",
        ("ruler", "backend", "tgi"):
            "Option 'backend' must be one of transformers, vllm, openai, got 'tgi'; fix its value.",
        ("niah-depth", "depths", "50,120"): "Option 'depths' must be in [0, 100], got 120.0; fix its value.",
        ("rope-dim-ablation", "measures", ""): "Option 'measures' must be a non-empty list, got []; fix its value.",
        ("rope-dim-ablation", "n_queries", -1): "Option 'n_queries' must be in [0, 100,000], got -1; fix its value.",
        ("accs-length", "stride", -1): "Option 'stride' must be in [0, 4,194,304], got -1; fix its value.",
        ("optimal-context", "n_bits", 2000): "Option 'n_bits' must be in [1, 1024], got 2000; fix its value.",
    }
    for (name, key, value), message in cases.items():
        with pytest.raises(CtxlensError) as err:
            make_config(get_experiment(name).Config, {key: value})
        assert str(err.value) == message


# -- help text --------------------------------------------------------------------------------


def test_every_option_of_every_experiment_has_help():
    missing = {name: [k for k, text in option_help(exp.Config).items() if not text.strip()]
               for name, exp in experiments().items()}
    assert {name: keys for name, keys in missing.items() if keys} == {}
    assert sum(len(option_help(exp.Config)) for exp in experiments().values()) > 250


@pytest.mark.parametrize("group", [SourceOptions, LengthSweepOptions, RopeOptions, DominantOptions, HeadOptions,
                                   SuffixOptions, GeometryOptions, TaskOptions])
def test_every_option_of_every_group_has_help(group):
    assert all(text.strip() for text in option_help(group).values())


def test_literal_choices_name_the_tables_behind_them():
    from ctxlens.experiments import niah_format, optimal_context
    from ctxlens.tasks.words import KINDS

    assert set(get_args(niah_format.Kind)) == set(KINDS)
    assert set(get_args(niah_format.Haystack)) == set(niah_format.HAYSTACKS)
    assert set(get_args(optimal_context.Grid)) == set(optimal_context.GRIDS)
