"""Chat templates rendered with bounds on time, memory and output (issue 32 part 4, issue 45 item 4).

A chat template comes with a model (``chat_template.jinja``, ``tokenizer_config.json``, a GGUF's
metadata) and runs on every prompt. jinja2's immutable sandbox already keeps it from code; two layers
keep it from hanging or exhausting memory too.

This module is the bounded environment and its in-process rendering (``compile_here``, ``render_here``);
callers go through ``ctxlens.tasks.sandbox_process`` (``compile_template``, ``render``), which adds the
process bound.

The process bound, which correctness rests on (``ctxlens.tasks.sandbox_process``): a template is
compiled and rendered in a worker process, started on first use and kept for the next renders, whose
address space is capped at its size after start-up plus ``MEMORY`` (1 GiB: room for the largest
values the counting guards let through -- a list of ``MAX_CHARS`` items is 256 MiB of pointers, a
string of as many characters up to 128 MiB -- and far below what a machine holding a model's weights
can spare). The parent kills it when no answer came ``SECONDS`` (10 s, plus a second's grace for its
own trace check to answer first) after the request, whatever it is doing (one C-level call such as
``json.dumps`` or ``==`` of two nested lists, which no trace function interrupts), and starts another
on the next render. A ``MemoryError`` inside it or its death is a ``TemplateLimit`` ("more than 1 GiB
of memory"), a kill one too ("more than 10 s"); it sends at most ``MAX_CHARS`` characters, so the
parent's memory does not grow with what a template does.

The counting guards, a cheap first line with precise messages (in the worker; alone where no worker
can run: no ``resource`` module, on Windows, or no Python executable to start):

- time: rendering stops after ``SECONDS`` of wall clock (a trace function checks the clock in the
  template's own Python frames, so nested loops that print nothing are stopped as well; one long
  C-level call is not);
- memory: ``*``, ``**``, ``+`` and ``%`` are intercepted, which also stops jinja2 from folding them at
  compile time, where ``{{ 'x' * 10**9 }}`` once took 3.78 GB (``*`` counts the items of nested lists:
  a list of one list repeated 2**25 times holds 2**50; ``tojson`` sizes what it would write first);
  every call and filter refuses an integer argument above ``MAX_WIDTH`` and results longer than
  ``MAX_CHARS``, and the string methods and filters that multiply text (``replace``, ``join``) are
  sized before they run. They count only what they know: ``tojson(indent=10**6)`` of 2,000 items,
  ``map('center', 10**6)`` over as many, ``s ~ s`` doubled eight times each make gigabytes unseen
  (tests/tasks/test_template_process_limit.py: the process bound stops them);
- output: at most ``MAX_CHARS`` characters.

Every failure, a refusal the template raises itself (``raise_exception``) included, is one
sentence naming the template's file (``TemplateFailed``); the limits are ``TemplateLimit``.
"""

from __future__ import annotations

import json
import math
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ctxlens.core.errors import CtxlensError

if TYPE_CHECKING:
    from _typeshed import TraceFunction  # typeshed's: what sys.settrace takes

_T = TypeVar("_T")

SECONDS = 10.0  # wall clock of one rendering
MAX_CHARS = 1 << 25  # characters of any string or list a template makes, and of its output
MAX_WIDTH = 1 << 20  # an integer argument (a width, a count) of a call or filter
MAX_POWER_BITS = 4096  # bits of an integer power
_WIDTHS = re.compile(r"[0-9]{8,}")  # a width or precision in a format string above MAX_WIDTH's digits
MEMORY = 1 << 30  # address space a rendering worker may take past its size after start-up
COUNTING = True  # the counting guards; tests turn them off to show that the process bound holds alone
CAPPED = False  # whether this process is a worker whose address space is capped (set by sandbox_process)


class TemplateFailed(CtxlensError):
    """A chat template that cannot be compiled or rendered (its own refusal included)."""


class TemplateLimit(TemplateFailed):
    """A chat template that ran past a bound (time, size): never a mere refusal of a role."""


class TemplateUnsafe(TemplateFailed, jinja2.exceptions.SecurityError):
    """A chat template that reached for what the sandbox forbids (an ``ImmutableSandbox`` refusal:
    still a ``jinja2`` ``SecurityError`` for callers that catch that)."""


class Bound(Exception):
    """Raised inside rendering when a bound is hit; ``render`` words it."""


def _size(value: object) -> int:
    return len(value) if isinstance(value, (str, list, tuple, dict)) else 0


def _deep(value: object, limit: int) -> int:
    """The characters and items ``value`` holds, nested lists and dicts included (what serialising it
    writes, within a constant), counted until ``limit`` is passed: a list of one list repeated 2**25
    times holds 2**50 items though its own length is 2**25."""
    total, stack = 0, [value]
    while stack and total <= limit:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, (list, tuple)):
            total += len(item)
            stack.extend(item[: limit - total + 1] if len(item) > limit - total else item)
        elif isinstance(item, dict):
            total += len(item)
            stack.extend(list(item.keys())[: limit + 1] + list(item.values())[: limit + 1])
        else:
            total += 1
    return total


def _check_ints(values: Iterable[object]) -> None:
    for v in values:
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) > MAX_WIDTH:
            raise Bound(f"an argument of {v} exceeds {MAX_WIDTH}")


def _check_result(value: _T) -> _T:
    if _size(value) > MAX_CHARS:
        raise Bound(f"a value of {_size(value):,} items exceeds {MAX_CHARS:,}")
    return value


def _text_size(items: Iterable[object]) -> int:
    return sum(len(x) if isinstance(x, str) else len(str(x)) for x in items)


def _expected(name: str, obj: object, args: Sequence[Any], kwargs: Mapping[str, Any]) -> int:
    """An upper bound of the size ``obj.name(*args)`` (a str method, or the filter ``name`` on
    ``obj``) would make, for the calls that multiply text; 0 for the others."""
    if name == "replace" and len(args) >= 2 and isinstance(obj, str):
        old, new = str(args[0]), str(args[1])
        return len(obj) + (len(obj) // max(len(old), 1) + 1) * len(new)
    if name == "join" and isinstance(obj, str) and args and isinstance(args[0], (list, tuple, str)):
        return _text_size(args[0]) + len(obj) * len(args[0])
    if name == "expandtabs" and isinstance(obj, str):
        return len(obj) + obj.count("\t") * int(args[0] if args else 8)
    if name in ("format", "format_map") and isinstance(obj, str) and _WIDTHS.search(obj):
        return MAX_CHARS + 1
    return 0


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    """The immutable sandbox with the bounds of the module docstring."""

    intercepted_binops = frozenset(["*", "**", "+", "%"])

    def call_binop(self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any) -> Any:
        """``left operator right`` once its result is known to fit the bounds."""
        if operator == "*":
            n, seq = (right, left) if isinstance(right, int) else (left, right)
            held = _deep(seq, MAX_CHARS // n) if isinstance(n, int) and n > 0 else 0
            if held * n > MAX_CHARS:
                raise Bound(f"{held:,}+ items (nested ones counted) times {n} exceeds {MAX_CHARS:,}")
        elif operator == "**" and isinstance(left, int) and isinstance(right, int) and abs(left) > 1:
            if right * math.log2(abs(left)) > MAX_POWER_BITS:
                raise Bound(f"{left} ** {right} has more than {MAX_POWER_BITS} bits")
        elif operator == "+" and _size(left) + _size(right) > MAX_CHARS:
            raise Bound(f"joining {_size(left):,} and {_size(right):,} items exceeds {MAX_CHARS:,}")
        elif operator == "%" and isinstance(left, str):
            _check_ints(right if isinstance(right, (tuple, list)) else [right])
            if _WIDTHS.search(left):
                raise Bound("a format width exceeds the bound")
        return _check_result(super().call_binop(context, operator, left, right))

    def call(__self: BoundedEnvironment, __context: jinja2.runtime.Context, __obj: Any,  # noqa: N805 - jinja2's names
             *args: Any, **kwargs: Any) -> Any:
        """A call (a global, a method) with bounded integer arguments and a bounded result."""
        _check_ints([*args, *kwargs.values()])
        name, owner = getattr(__obj, "__name__", ""), getattr(__obj, "__self__", None)
        if _expected(name, owner, args, kwargs) > MAX_CHARS:
            raise Bound(f"{name}() would make more than {MAX_CHARS:,} characters")
        return _check_result(super().call(__context, __obj, *args, **kwargs))


def _bounded_filter(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` (a filter) with bounded integer arguments, size estimate and result."""

    def bounded(*args: Any, **kwargs: Any) -> Any:
        values = [a for a in args if not isinstance(a, (jinja2.runtime.Context, jinja2.nodes.EvalContext,
                                                        jinja2.Environment))]
        _check_ints([*values[1:], *kwargs.values()])
        if values and name == "join":
            items = list(values[0]) if not isinstance(values[0], (list, tuple, str)) else values[0]
            sep = str(values[1]) if len(values) > 1 else str(kwargs.get("d", ""))
            if _text_size(items) + len(sep) * len(items) > MAX_CHARS:
                raise Bound(f"join would make more than {MAX_CHARS:,} characters")
            args = tuple(items if a is values[0] else a for a in args)
        elif values and _expected(name, values[0], values[1:], kwargs) > MAX_CHARS:
            raise Bound(f"{name} would make more than {MAX_CHARS:,} characters")
        return _check_result(function(*args, **kwargs))

    for attr in ("jinja_pass_arg",):  # keep how jinja2 passes the context / environment
        if hasattr(function, attr):
            setattr(bounded, attr, getattr(function, attr))
    return bounded


class _Namespace(jinja2.utils.Namespace):
    """jinja2's namespace without underscore names (no way to CPython internals)."""

    def __init__(*args: Any, **kwargs: Any) -> None:
        self, attrs = args[0], dict(*args[1:], **kwargs)
        for name in attrs:
            _Namespace.check(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        _Namespace.check(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def check(name: object) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(f"Chat templates cannot set underscore names ({name!r}).")


def environment(counting: bool = True) -> ImmutableSandboxedEnvironment:
    """The environment with transformers' chat-template globals and filters, each bounded (``counting``)."""

    def raise_exception(message: str) -> NoReturn:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x: Any, ensure_ascii: bool = False, indent: int | str | None = None,
               separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
        if counting and _deep(x, MAX_CHARS) > MAX_CHARS:  # sized first: json.dumps itself cannot be stopped
            raise Bound(f"tojson would write more than {MAX_CHARS:,} characters")
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt: str) -> str:
        return datetime.now().strftime(fmt)

    kind = BoundedEnvironment if counting else ImmutableSandboxedEnvironment
    env = kind(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    if counting:
        env.filters = {name: _bounded_filter(name, f) for name, f in env.filters.items()}
    env.globals.update(raise_exception=raise_exception, strftime_now=strftime_now, namespace=_Namespace,
                       dict=lambda *a, **k: dict(*a, **k))
    return env


def check_source(source: object, where: str) -> None:
    if not isinstance(source, str) or len(source) > MAX_CHARS:
        raise TemplateFailed(f"The chat template in {where} is not text of at most {MAX_CHARS:,} characters; fix it "
                             "or pass --template plain.")


def compile_here(source: str, where: str, counting: bool = True, seconds: float | None = None) -> jinja2.Template:
    seconds = SECONDS if seconds is None else seconds
    try:
        return _timed(lambda: environment(counting).from_string(source), seconds, counting)
    except TemplateFailed:
        raise
    except Exception as err:  # noqa: BLE001 - whatever a foreign template does is said in one sentence
        raise failed(err, where) from None


def render_here(source: str, where: str, context: dict[str, Any], counting: bool = True,
                seconds: float | None = None) -> str:
    """``source`` rendered in this process, bounded by the counting guards (none when not ``counting``)."""
    seconds = SECONDS if seconds is None else seconds
    template = compile_here(source, where, counting, seconds)

    def run() -> str:
        out, size = [], 0
        for chunk in template.generate(**context):
            size += len(chunk)
            if size > MAX_CHARS:  # kept without counting too: what the worker sends is bounded
                raise Bound(f"the output exceeds {MAX_CHARS:,} characters")
            out.append(chunk)
        return "".join(out)

    try:
        return _timed(run, seconds, counting)
    except TemplateFailed:
        raise
    except Exception as err:  # noqa: BLE001 - see compile_here
        raise failed(err, where) from None


def _timed(work: Callable[[], _T], seconds: float, counting: bool = True) -> _T:
    """``work()`` stopped after ``seconds`` of wall clock (checked in every traced Python line)."""
    if not counting:
        return work()
    deadline = time.monotonic() + seconds
    ticks = [0]

    def local(frame: FrameType, event: str, arg: Any) -> TraceFunction:
        ticks[0] += 1
        if ticks[0] % 256 == 0 and time.monotonic() > deadline:
            raise Bound(f"rendering took more than {seconds:g} s")
        return local

    before = sys.gettrace()
    sys.settrace(lambda frame, event, arg: local)
    try:
        return work()
    finally:
        sys.settrace(before)


def failed(err: BaseException, where: str) -> TemplateFailed:
    """One sentence for ``err`` raised by the template in ``where``."""
    message = " ".join(str(err).split())[:200]
    if isinstance(err, (Bound, RecursionError, MemoryError, OverflowError)):
        what = message if isinstance(err, Bound) else f"{type(err).__name__}: {message or 'too large'}"
        what = f"more than {MEMORY / 2**30:g} GiB of memory" if isinstance(err, MemoryError) and CAPPED else what
        return TemplateLimit(f"The chat template in {where} ran past a bound ({what}); fix the template or pass "
                             "--template plain.")
    if isinstance(err, jinja2.exceptions.SecurityError):
        return TemplateUnsafe(f"The chat template in {where} reached for what the sandbox forbids ({message}); fix "
                              "the template or pass --template plain.")
    if type(err) is jinja2.exceptions.TemplateError:
        return TemplateFailed(f"The chat template in {where} refused the prompt ({message}); fix the template or "
                              "pass --template plain.")
    return TemplateFailed(f"The chat template in {where} cannot be rendered ({type(err).__name__}: {message}); fix "
                          "the template or pass --template plain.")
