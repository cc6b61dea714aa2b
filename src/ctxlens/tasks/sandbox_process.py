"""The process bound of ``ctxlens.tasks.sandbox``: chat templates compiled and rendered in a worker process.

The worker is ``python -c`` running ``serve``, started on the first render of a process (0.15 s on two
cores) and kept for the next ones (0.2 ms a round trip, on top of the 1-10 ms of compiling and rendering
a real template, done in the worker instead of here); it speaks JSON lines: a request line on its stdin (the
template, where it was read, its JSON context, the bounds), an answer line on its stdout followed by
the rendered text's UTF-8 bytes. In it:

- memory: its address space is capped (``RLIMIT_AS``) at its size after start-up plus
  ``sandbox.MEMORY``; an allocation past it is a ``MemoryError`` (answered as ``TemplateLimit``) or
  its death. Not where ``/proc`` is missing (macOS, which does not enforce the cap anyway): the
  time bound alone holds there;
- CPU: before each request its CPU time is capped at what it used plus twice the time bound and
  10 s, so a worker whose parent died mid-render still ends (without a core file).

In the parent: no answer ``GRACE`` after ``sandbox.SECONDS`` of wall clock and the worker is killed
(``TemplateLimit``, "more than 10 s"); a worker that ends without answering is ``TemplateLimit``,
"more than 1 GiB of memory"; either way the next render starts a fresh one. The parent reads at most
a 64 KiB answer line and ``4 * MAX_CHARS`` bytes of text. Requests are serialised by a lock; a forked
child starts its own worker. A template's context must be JSON values (``tokenizer._plain``). Where
no worker can run (no ``resource`` module: Windows; no Python executable to start) ``ask`` returns
None and the caller renders in its own process with the counting guards alone.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

import ctxlens.tasks.sandbox as sandbox
from ctxlens.tasks.sandbox import TemplateFailed, TemplateLimit, TemplateUnsafe

if TYPE_CHECKING:
    import jinja2

try:
    import resource
except ImportError:  # Windows: the counting guards alone
    resource = None  # type: ignore[assignment]

GRACE = 1.0  # seconds past SECONDS before the parent kills a worker (its own trace check answers first)
STARTUP = 60.0  # seconds a worker may take to start (a loaded machine)
_LOCK = threading.Lock()  # one request at a time through this process's worker
_WORKER: list[Worker | None] = []  # this process's worker once started (None: none can run here)
_KINDS = {"TemplateLimit": TemplateLimit, "TemplateUnsafe": TemplateUnsafe}


def compile_template(source: str, where: str = "the chat template") -> jinja2.Template:
    """``source`` compiled in the bounded sandbox; a syntax error (or a bound hit while jinja2 folds
    constants) is one sentence naming ``where``. Compiled in the worker first where there is one, so
    that jinja2's constant folding meets the process bound before it runs here."""
    sandbox.check_source(source, where)
    ask({"op": "compile", "source": source, "where": where})
    return sandbox.compile_here(source, where)


def render(source: str, where: str, **context: Any) -> str:
    """``source`` rendered with ``context`` (JSON values) within the bounds, in the worker where there is
    one; every failure one sentence naming ``where``."""
    sandbox.check_source(source, where)
    text = ask({"op": "render", "source": source, "where": where, "context": context})
    return sandbox.render_here(source, where, context) if text is None else text


def ask(request: dict) -> str | None:
    """The worker's text for ``request`` (``op``: render | compile; ``source``, ``where``, ``context``);
    None where no worker can run. A failure is raised as ``sandbox`` raises it."""
    with _LOCK:
        worker = _worker()
        return None if worker is None else worker.ask(request, sandbox.SECONDS)


class Worker:
    """A child ``python`` running ``serve``: a request line in; an answer line, then the text's bytes, out."""

    def __init__(self) -> None:
        # run in the folder holding ctxlens: what ``-c`` puts first on sys.path is this ctxlens, not the caller's cwd
        src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.owner, self.buffer = os.getpid(), bytearray()
        self.proc = subprocess.Popen([sys.executable, "-c", "from ctxlens.tasks.sandbox_process import serve; serve()"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=src,
                                     start_new_session=True)  # no ^C from the terminal: the parent ends it
        self.fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        if not (self._take(None, time.monotonic() + STARTUP) or b"").startswith(b'{"ready"'):
            self.close()
            raise OSError("the chat-template worker did not start")

    def ask(self, request: dict, seconds: float) -> str:
        """The worker's text for ``request``; its failure, its death (memory) or its kill (time) raised here."""
        deadline = time.monotonic() + seconds + GRACE
        try:
            answer, text = self._exchange({**request, "counting": sandbox.COUNTING, "seconds": seconds}, deadline)
        except BaseException:  # an alarm or ^C mid-answer: what the worker sends next is unknown
            self.close()
            raise
        if "ok" in answer and text is not None:
            return text.decode("utf-8", "surrogatepass")
        if answer.get("retire") or "error" not in answer:  # a bound hit: a fresh worker for the next render
            self.close()
        if "error" in answer:
            raise _KINDS.get(answer["error"], TemplateFailed)(answer["message"])
        late = time.monotonic() >= deadline
        what = f"rendering took more than {seconds:g} s" if late else f"more than {sandbox.MEMORY / 2**30:g} GiB " \
            "of memory"
        raise sandbox.failed(sandbox.Bound(what), request["where"])

    def _exchange(self, request: dict, deadline: float) -> tuple[dict, bytes | None]:
        try:
            self.proc.stdin.write(json.dumps(request, default=str).encode() + b"\n")  # type: ignore[union-attr]
            self.proc.stdin.flush()  # type: ignore[union-attr]
        except OSError:  # it ended
            return {}, None
        line = self._take(None, deadline)
        answer = json.loads(line) if line else {}
        return answer, self._take(answer["ok"], deadline) if "ok" in answer else None

    def _take(self, size: int | None, deadline: float) -> bytes | None:
        """The next line (``size`` None; at most 64 KiB) or ``size`` bytes (at most 4 bytes a character of
        ``MAX_CHARS``); None when the worker ended or the deadline passed first."""
        if size is not None and not 0 <= size <= 4 * sandbox.MAX_CHARS:
            return None
        while True:
            end = self.buffer.find(b"\n") + 1 if size is None else size * (len(self.buffer) >= size)
            if end or size == 0:
                with memoryview(self.buffer) as view:
                    out = bytes(view[:end])
                del self.buffer[:end]
                return out
            left = deadline - time.monotonic()
            if (size is None and len(self.buffer) > 1 << 16) or left <= 0:
                return None
            if not select.select([self.fd], [], [], left)[0]:
                return None
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                return None
            self.buffer += chunk

    def close(self) -> None:
        """The worker killed (if still running) and reaped."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                pipe.close()  # type: ignore[union-attr]
            except OSError:
                pass


def _worker() -> Worker | None:
    """This process's worker (started, or started again after a kill), None where none can run."""
    if _WORKER and _WORKER[0] is not None and (_WORKER[0].owner != os.getpid() or _WORKER[0].proc.poll() is not None):
        _WORKER.clear()  # ended, or inherited by a fork: a fresh one (the parent's own is left alone)
    if not _WORKER:
        try:
            _WORKER.append(Worker() if resource is not None else None)
        except OSError:  # no Python to start (an embedded interpreter): the counting guards alone
            _WORKER.append(None)
    return _WORKER[0]


@atexit.register
def _stop() -> None:
    if _WORKER and _WORKER[0] is not None and _WORKER[0].owner == os.getpid():
        _WORKER[0].close()


def serve() -> None:
    """The worker's loop: its address space and CPU time capped (module docstring), one answer per
    request line until its stdin ends."""
    out, sys.stdout = sys.stdout.buffer, sys.stderr  # nothing but the answers on stdout
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a worker ended by a cap leaves no core file
    try:
        with open("/proc/self/statm") as statm:
            cap = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE") + sandbox.MEMORY
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (min(x for x in (cap, soft, hard) if x != resource.RLIM_INFINITY),
                                                hard))
        sandbox.CAPPED = True
    except (OSError, ValueError):
        pass
    out.write(json.dumps({"ready": sandbox.CAPPED}).encode() + b"\n")
    out.flush()
    for line in sys.stdin.buffer:
        request, data = json.loads(line), b""
        usage, (_, hard) = resource.getrusage(resource.RUSAGE_SELF), resource.getrlimit(resource.RLIMIT_CPU)
        cpu = int(usage.ru_utime + usage.ru_stime + 2 * request["seconds"] + 10)
        if hard == resource.RLIM_INFINITY or cpu <= hard:
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, hard))
        try:
            if request["op"] == "compile":
                sandbox.compile_here(request["source"], request["where"], request["counting"], request["seconds"])
            else:
                data = sandbox.render_here(request["source"], request["where"], request["context"],
                                            request["counting"], request["seconds"]).encode("utf-8", "surrogatepass")
            answer: dict = {"ok": len(data)}
        except TemplateFailed as err:
            answer = {"error": type(err).__name__, "message": str(err), "retire": isinstance(err, TemplateLimit)}
        out.write(json.dumps(answer).encode() + b"\n" + data)
        out.flush()
