"""The report's inline stylesheet (no external fonts or files)."""

CSS = """
:root { --fg: #1b1f24; --muted: #5b6470; --line: #d9dde3; --bg: #ffffff; --soft: #f5f7fa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       background: var(--bg); margin: 0 auto; padding: 1.2em 2em 4em; max-width: 1500px; }
h1 { margin: 0 0 .2em; font-size: 1.7em; }
h2 { margin: 1.8em 0 .3em; padding-top: .6em; border-top: 2px solid var(--line); font-size: 1.35em; }
h3 { margin: 1.2em 0 .3em; font-size: 1.1em; }
h4 { margin: .8em 0 .3em; font-size: .95em; color: var(--muted); }
.note, .paper, .files { color: var(--muted); font-size: .9em; }
.lead { font-weight: 600; margin: .2em 0; }
nav ol { columns: 3; font-size: .9em; }
ul.models { list-style: none; padding: 0; display: flex; flex-wrap: wrap; gap: .4em 1.4em; }
.swatch { display: inline-block; width: .9em; height: .9em; border-radius: 2px; margin-right: .4em;
          vertical-align: -.1em; }
.panel { display: flex; flex-wrap: wrap; gap: 1.2em; align-items: flex-start; margin: 1em 0 1.6em; }
figure.plot { margin: 0; flex: 0 1 auto; max-width: 100%; }
figure.plot img { display: block; max-width: 100%; height: auto; border: 1px solid var(--line); }
figcaption { font-size: .88em; margin-top: .3em; max-width: 60em; }
.tables { flex: 1 1 380px; min-width: 320px; max-width: 100%; }
.scroll { max-height: 420px; overflow: auto; border: 1px solid var(--line); }
table { border-collapse: collapse; font-size: .82em; }
table.data th { position: sticky; top: 0; background: var(--soft); }
th, td { padding: .2em .55em; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top;
         white-space: pre-wrap; overflow-wrap: break-word; max-width: 40em; }
th { white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.kv th { color: var(--muted); font-weight: 500; }
.cols { display: flex; flex-wrap: wrap; gap: 1.2em 2em; }
.card { flex: 0 1 auto; max-width: 100%; }
.status { padding: .05em .5em; border-radius: 1em; font-weight: 600; white-space: nowrap; }
.status.reproduced { background: #d5f2e3; color: #0b5d36; }
.status.not-reproduced { background: #fbdada; color: #8a1414; }
.status.not-measured { background: #eceef1; color: #4a525c; }
.status.undecided { background: #fdf0cf; color: #7a5200; }
.status.not-applicable { background: #eceef1; color: #4a525c; font-style: italic; }
.verdict { font-style: italic; }
ul.measured { margin: 0; padding-left: 1.1em; }
section.warnings h2 { color: #8a4b00; }
"""
