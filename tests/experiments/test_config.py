"""Typed experiment options: coercion from CLI strings and YAML values, clear errors."""

from dataclasses import dataclass, field

import pytest

from ctxlens import CtxlensError
from ctxlens.experiments.base import make_config


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
    ({"flag": "maybe"}, "must be bool"),
    ({"lengths": [1.5]}, "must be int"),
    ({"name": ["a"]}, "must be str"),
])
def test_bad_options(options, message):
    with pytest.raises(CtxlensError, match=message):
        make_config(Cfg, options)
