"""The report in a real browser (headless Chromium over the DevTools pipe), and hostile text.

Skipped when no Chromium is installed (CI installs Debian's ``chromium``). The screenshot goes
to ``$CTXLENS_ARTIFACTS/report.png`` when that variable is set, else next to the report.
"""

import os
import struct
from html.parser import HTMLParser
from pathlib import Path

import pytest

from ctxlens.report.build import build_report
from tests.report._browser import Browser, find_chromium
from tests.report.conftest import config_of, write_run

CHROMIUM = find_chromium()
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")

FIGURES = """JSON.stringify([...document.querySelectorAll('figure.plot img')].map(i => {
  const r = i.getBoundingClientRect();
  return {w: r.width, h: r.height, nw: i.naturalWidth, nh: i.naturalHeight, done: i.complete};
}))"""


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.fixture
def browser(tmp_path):
    with Browser(CHROMIUM, tmp_path / "profile") as b:
        yield b


@needs_chromium
def test_report_loads_cleanly_in_chromium(full_report, browser):
    import json

    page = browser.open(full_report.path)
    assert page.errors() == []
    figures = json.loads(page.evaluate(FIGURES))
    beside = sum(1 for s in full_report.sections if s.experiment in ("niah-depth", "loss-vs-length")
                 and s.panels and s.panels[0].fig is not None)  # the card's figures, drawn again beside it
    assert len(figures) == sum(p.fig is not None for _, p in full_report.panels) + beside > 20
    for f in figures:
        assert f["done"] and f["nw"] > 0 and f["nh"] > 0 and f["w"] > 0 and f["h"] > 0, f
    assert all(url.startswith(("file:", "data:")) for url in page.requests())  # offline: nothing fetched
    shot = Path(os.environ.get("CTXLENS_ARTIFACTS", full_report.path.parent)) / "report.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    width, height = png_size(page.screenshot(shot))
    assert width >= 1000 and height >= 1000
    print(f"screenshot: {shot}")


# ------------------------------------------------------------------------------- hostile text
EVIL = {
    "model": '<script>window.__pwned = 1</script><b class="evil">$\\frac{x</b>',
    "pred": '<img src=x onerror="window.__pwned = 2">',
    "prompt": '"><svg onload="window.__pwned = 3"></svg><style>body{display:none}</style>',
    "experiment": 'probe"><script>window.__pwned = 4</script>',
    "flag": "</td></tr></table><script>window.__pwned = 5</script>",
    "task": "<i class='evil'>qa</i>",
    "option": '<iframe src="javascript:window.__pwned = 6"></iframe>',
    "argv": '<a href="javascript:window.__pwned = 7">click</a>',
    "finding": "<marquee class='evil'>yes</marquee>&amp;",
}


def hostile_report(tmp_path) -> Path:
    m = EVIL["model"]
    ruler = [{"model": m, "experiment": "ruler", "task": EVIL["task"], "length": n, "sample": i, "score": 100.0 * i,
              "pred": EVIL["pred"], "outputs": [EVIL["pred"]], "prompt": EVIL["prompt"]}
             for n in (512, 1024) for i in range(2)]
    ruler.append({"model": m, "experiment": "ruler", "task": EVIL["task"], "length": 2048, "sample": None,
                  "score": None, "flag": EVIL["flag"]})
    env = {"python": "3.11", "argv": [EVIL["argv"]], "packages": {EVIL["option"]: "1"}}
    runs = [write_run(tmp_path / "ruler", ruler, config=config_of("ruler", [m], note=EVIL["option"]), env=env),
            write_run(tmp_path / "tl", [{"model": m, "experiment": "token-loss", "length": 16, "sample": 0,
                                          "nll": 1.0}], config=config_of("token-loss", [m]), env=env),
            write_run(tmp_path / "probe", [{"model": m, "experiment": EVIL["experiment"], "text": EVIL["prompt"],
                                             "value": 1.0}], config=config_of(EVIL["experiment"], [m]), env=env)]
    finding = {"finding": EVIL["finding"], "paper": EVIL["model"], "expected": EVIL["pred"],
               "measured": {EVIL["task"]: EVIL["prompt"]}, "status": "not measured"}
    return build_report(runs, tmp_path / "evil.html", findings=[finding], strict=True).path


class Text(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.text = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def test_hostile_text_is_escaped_in_the_markup(tmp_path):
    parser = Text()
    parser.feed(hostile_report(tmp_path).read_text())
    assert not [t for t, _ in parser.tags if t in ("script", "svg", "iframe", "marquee", "i")]
    assert not any(a.get("class") == "evil" or "onerror" in a or "onload" in a for _, a in parser.tags)
    assert all(a["href"].startswith(("#", "evil-figures/")) for t, a in parser.tags if t == "a")
    assert [t for t, _ in parser.tags].count("style") == 1
    text = "".join(parser.text)
    for value in EVIL.values():
        assert value in text, value


@needs_chromium
def test_hostile_text_appears_as_text_in_chromium(tmp_path, browser):
    page = browser.open(hostile_report(tmp_path))
    assert page.errors() == []  # no blocked script, no failed load: nothing tried to run or fetch
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.evaluate("document.querySelectorAll('script, svg, iframe, marquee, .evil, [onerror], [onload]')"
                         ".length") == 0
    assert page.evaluate("document.querySelectorAll('style').length") == 1
    assert page.evaluate("getComputedStyle(document.body).display") == "block"
    body = page.evaluate("document.body.textContent")
    for value in EVIL.values():
        assert value in body, value
