"""``scripts/findings.py``: the findings over any run directories, computed by ``ctxlens.findings`` only."""

import importlib.util
import json
from pathlib import Path

from ctxlens.findings import FINDINGS, compute_findings
from ctxlens.report.findings import read_findings

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "report" / "data"


def _script():
    spec = importlib.util.spec_from_file_location("findings_script", ROOT / "scripts" / "findings.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_script_writes_the_findings_of_ctxlens_findings(tmp_path):
    runs = [str(DATA / e) for e in ("accs-layers", "accs-boundary", "positional-heads", "head-masking")]
    out = tmp_path / "f.json"
    table = _script().main([*runs, "--model", "rope=zoo:random-llama", "--model", "mamba2=other-llama",
                            "--out", str(out)])
    models = {"rope": "zoo:random-llama", "mamba2": "other-llama"}
    expected = compute_findings(runs, models={**{n: f"zoo:{n}" for n in ("alibi", "mlstm", "griffin", "hybrid")},
                                              **models})
    assert table == expected and len(table) == len(FINDINGS)
    assert read_findings(out) == table  # opens a report as it is
    assert json.loads(out.read_text())["models"]["rope"] == "zoo:random-llama"
    measured = {f["finding"] for f in table if f["status"] != "not measured"}
    assert {"ACCS falls with layer depth", "positional heads matter more than random heads"} <= measured
