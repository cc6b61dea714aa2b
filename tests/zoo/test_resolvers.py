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
    with pytest.raises(CtxlensError, match=r"^Unknown model prefix 'zooo:' in 'zooo:rope'; did you mean 'zoo:'\?"):
        resolve("zooo:rope")


def test_importing_lm_imports_no_zoo_module():
    code = "import ctxlens.lm.loading, sys; assert not [m for m in sys.modules if m.startswith('ctxlens.zoo')]"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_lm_resolves_zoo_specs_without_importing_the_zoo_first():
    code = ("import sys; from ctxlens.lm.specs import resolved; assert 'ctxlens.zoo' not in sys.modules; "
            "r = resolved('zoo:rope'); from ctxlens.zoo import registry; "
            "assert (r.origin, r.train_length) == ('zoo', registry.train_length('rope')), r; "
            "assert r.path == str(registry.zoo_path('rope')) and r.train_length, r")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_findings_default_training_length_is_the_zoo_recipes():
    assert TRAIN_LENGTH == RECIPE.seq_len


def test_an_installed_package_adds_a_prefix_through_its_entry_point(tmp_path):
    """The mechanism ctxlens's own zoo: and ref: use: any installed distribution that declares an
    entry point in ``ctxlens.model_prefixes`` gets its prefix, found by the standard library's metadata."""
    (tmp_path / "mine.py").write_text("from ctxlens.lm.specs import Resolved\n\n"
                                      "def resolve(name):\n"
                                      "    return Resolved(path='/models/' + name, origin='mine')\n")
    info = tmp_path / "mine-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mine\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[ctxlens.model_prefixes]\nmine = mine:resolve\n")
    code = (f"import sys; sys.path.insert(0, {str(tmp_path)!r}); from ctxlens.lm.specs import resolved; "
            "r = resolved('mine:tiny'); assert (r.path, r.origin) == ('/models/tiny', 'mine'), r; "
            "assert resolved('zoo:rope').origin == 'zoo'")
    subprocess.run([sys.executable, "-c", code], check=True)
