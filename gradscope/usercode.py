"""The sandbox around the user's code: whatever it raises becomes a TargetError (exit 3) that
shows the user's own frames only, with a hint where the mistake is a known one; leaving through
`sys.exit` is a failure too. This is the one place that turns a user's SystemExit into a failure
(a check must never pass, or end gradscope with the user's exit code, because the code exited);
gradscope's own stop (errors.Stopped, from SIGTERM) passes through untouched."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import os
import re
import sys
import textwrap
import traceback
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from gradscope import process
from gradscope.errors import GradscopeError, Stopped, TargetError
from gradscope.process import Left

# frames that are not the user's: gradscope itself, torch, the import machinery
OURS = (str(Path(__file__).resolve().parent), str(Path(torch.__file__).resolve().parent),
        "<frozen importlib", str(Path(inspect.__file__).resolve().parent))


def _library(module: str) -> str:
    spec = importlib.util.find_spec(module)
    return str(Path(spec.origin).resolve().parent) if spec and spec.origin else "<none>"


# ... and the libraries gradscope itself runs on: an error raised in them is not the user's
LIBRARIES = tuple(_library(m) for m in ("sympy", "rich", "typer", "click"))

LEFT_HINT = ("the target called sys.exit() or raised SystemExit; gradscope counts a target "
             "that leaves as one that failed (a check must never pass because the code exited)")
EXIT_HINT = ("the target called os._exit(); gradscope counts a target that leaves as one that "
             "failed (a check must never pass because the code exited)")


def shown(obj: object) -> str:
    """str(obj) of a user's object, or its type's name where its __str__ raises."""
    try:
        return str(obj)
    except Exception:
        return f"<{type(obj).__name__} object>"


def relative_path(path: str) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return path


def backward_location(cls: type) -> str:
    """`file.py:LINE` of a Function class's backward (its `def`), or '' when unreadable."""
    return def_location(getattr(cls, "backward", None))


def def_location(fn: object) -> str:
    """`file.py:LINE` of a function's `def` (below its decorators), or '' when unreadable."""
    backward = inspect.unwrap(fn) if fn is not None else None  # (@once_differentiable wraps)
    try:
        path = inspect.getsourcefile(backward)  # type: ignore[arg-type]
        lines, line = inspect.getsourcelines(backward)  # type: ignore[arg-type]
    except (OSError, TypeError):
        return ""
    # (the source starts at its decorators: `@staticmethod` is not where backward is written)
    below = next((k for k, text in enumerate(lines)
                  if text.lstrip().startswith(("def ", "async def "))), 0)
    return place(path or "?", line + below)


def returns(backward: Any) -> int:
    """How many `return` statements a backward has (its nested functions' aside)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(backward)))
    except (OSError, TypeError, SyntaxError):
        return 0
    count, todo = 0, list(ast.iter_child_nodes(tree.body[0])) if tree.body else []
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        count += isinstance(node, ast.Return)
        todo.extend(ast.iter_child_nodes(node))
    return count


def place(path: str, line: int) -> str:
    """`file.py:LINE`, or for code in a notebook cell the cell as IPython's tracebacks name it
    (`Cell In[5], line 11`, not the kernel's `1459987837.py:11`)."""
    cell = _cell(path)
    return f"{cell}, line {line}" if cell else f"{Path(path).name}:{line}"


def _cell(path: str) -> str | None:
    """'Cell In[5]' where `path` is a cell IPython compiled in this process (its own
    CachingCompiler.format_code_name, the one its tracebacks use), else None."""
    ipython = sys.modules.get("IPython")  # (never imported here: only where a shell runs)
    get = getattr(ipython, "get_ipython", None)
    try:
        shell = get() if callable(get) else None
        named = shell.compile.format_code_name(path) if shell is not None else None
    except Exception:  # an IPython of another shape: the file name as it is
        return None
    if isinstance(named, tuple) and len(named) == 2:
        return f"{named[0]} {named[1]}"
    return None


def calling_site() -> str:
    """`file.py:LINE` of the innermost frame of the current stack in the user's code (neither
    gradscope's nor torch's), or ''."""
    frame = next((f for f in reversed(traceback.extract_stack())
                  if not f.filename.startswith(OURS)), None)
    return place(frame.filename, frame.lineno or 0) if frame is not None else ""


def user_frames(exc: BaseException) -> list[str]:
    """The user's frames of a traceback (gradscope's, torch's and the importer's left out),
    each as its 'File …, line …, in …' line and the source line under it; a method is named
    with its class (`Saves.backward`: which Function's backward raised, where torch's
    traceback says only `backward`)."""
    lines = []
    tb = exc.__traceback__
    names = [getattr(f.f_code, "co_qualname", f.f_code.co_name) for f, _ in traceback.walk_tb(tb)]
    frames = traceback.extract_tb(tb)
    for frame, name in [(f, n) for f, n in zip(frames, names, strict=False)
                        if not f.filename.startswith(OURS)][-6:]:
        name = name.replace(".<locals>", "") if "<" not in frame.name else frame.name
        cell = _cell(frame.filename)
        lines.append(f"  {cell}, line {frame.lineno}, in {name}" if cell else
                     f'  File "{relative_path(frame.filename)}", line {frame.lineno}, '
                     f"in {name}")
        if frame.line:
            lines.append(f"    {frame.line.strip()}")
    return lines


def user_error(exc: BaseException, during: str, hint: str | None = None) -> TargetError:
    """A TargetError whose message shows the user's frames and the error, nothing of ours."""
    frames = user_frames(exc)
    detail = str(exc).strip().splitlines()
    first = detail[0] if detail else ""
    name = "os._exit" if isinstance(exc, Left) else type(exc).__name__
    lines = [f"the target's own code raised during {during}:", *frames,
             f"{name}: {first}".rstrip(": ")]
    hint = hint or known_hint(exc)
    if hint:
        lines.append(f"hint: {hint}")
    return TargetError("\n".join(lines), during=during, error=name,
                       detail=str(exc), frames=frames)


def refusal(exc: BaseException) -> str:
    """'ValueError: underflow in dt': how the target refused values gradscope chose to try
    (the user's own error type and first line, not our wrapping)."""
    if isinstance(exc, TargetError):
        name, text = exc.error, exc.detail
    else:
        name, text = type(exc).__name__, str(exc)
    first = (text.strip().splitlines() or [""])[0]
    return f"{name}: {first[:160]}".rstrip(": ")


def known_hint(exc: BaseException) -> str | None:
    """A hint for mistakes whose torch or Python message is well known."""
    text = str(exc)
    if "before Module.__init__() call" in text or "has no attribute '_parameters'" in text \
            or "has no attribute '_modules'" in text:
        return "did you call super().__init__() first in your nn.Module's __init__?"
    if "tensor() takes 1 positional argument but" in text:
        return ("torch.tensor(data) makes a tensor of the data it is given; for a tensor of a "
                "shape, write torch.empty(3, 3), torch.zeros(3, 3) or torch.rand(3, 3)")
    if "one of the variables needed for gradient computation has been modified" in text:
        return ("a tensor saved for backward was changed in place; clone it before changing "
                "it, or save a copy")
    if "process group has not been initialized" in text.lower():
        return ("the target uses torch.distributed: run it on ranks with --nproc N (nproc= "
                "from Python), which starts them with a process group (docs/distributed.md)")
    return None


IN_PLACE = "modified by an inplace operation"
# a frame of a traceback as anomaly mode prints it, with its source line
TRACED = re.compile(r'File "([^"]+)", line (\d+), in (\S+)\n\s*([^\n]*)')
# torch's words for the tensor changed: "[torch.FloatTensor [4]], which is output 0 of Sigmoid,
# is at version 1; expected version 0 instead"
CHANGED = re.compile(r"\[torch\.\w+ \[([\d, ]*)\]\](?:, which is output \d+ of (\w+),)? "
                     r"is at version \d+; expected version (\d+)")
# in-place calls that are no method ending in "_"
IN_PLACE_CALLS = frozenset({"__iadd__", "__isub__", "__imul__", "__itruediv__",
                            "__ifloordiv__", "__ipow__", "__imod__", "__iand__", "__ior__",
                            "__ixor__", "__ilshift__", "__irshift__", "__imatmul__",
                            "__setitem__"})


def changed_in_place(exc: BaseException, again: Callable[[], object]) -> str | None:
    """The hint for torch's "modified by an inplace operation", with the user's line whose
    op saved the tensor that was changed and the line that changed it: `again` (a fresh
    forward and backward) run under anomaly detection, whose warning carries the forward's
    traceback (torch's message names only the op's class: "output 0 of Sigmoid"), and with
    each in-place call of the forward watched (the version it found the tensor at, the node
    that made it, the user's line). Other errors: their known hint."""
    hint = known_hint(exc)
    if IN_PLACE not in str(exc):
        return hint
    changes: list[_Change] = []
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            with torch.autograd.detect_anomaly(check_nan=False), _InPlaceCalls(changes):
                again()
        except Exception:  # (the same error again: its warning is what was wanted)
            pass
    frames = [m for w in seen for m in TRACED.findall(str(w.message)) if users_file(m[0])]
    changer = _changer(str(exc), changes)
    changed = (f"by `{changer.code}` (in {changer.function}, "
               f"{place(changer.path, changer.line)})") if changer is not None else ""
    if not frames:
        return hint if changer is None else \
            f"the tensor saved for backward was changed {changed}; clone it before changing it"
    path, line, name, code = frames[-1]
    by = f" and changed {changed}" if changed else ""
    return (f"the tensor changed in place was saved for backward by `{code.strip()}` (in "
            f"{name}, {place(path, int(line))}){by}; clone it before changing it, or change a "
            "copy")


class _Change:
    """One in-place call of the user's forward: the tensor's shape, the version it found it
    at and the node that made it (None: a leaf), and the user's line."""

    def __init__(self, tensor: torch.Tensor, frame: traceback.FrameSummary) -> None:
        self.shape = tuple(tensor.shape)
        self.version = tensor._version
        self.node = op_of(tensor.grad_fn) if tensor.grad_fn is not None else None
        self.path, self.line, self.function = frame.filename, frame.lineno or 0, frame.name
        self.code = without_comment((frame.line or "").strip())


def op_of(node: Any) -> str:
    """The op an autograd node is the backward of, as torch's messages name it ("Sigmoid")."""
    return re.sub(r"Backward\d*$", "", type(node).__name__)


def in_place(func: Any) -> bool:
    """Whether a torch function changes its first argument in place (a method ending in "_",
    an augmented assignment, an item assignment)."""
    name = getattr(func, "__name__", "")
    return name in IN_PLACE_CALLS or (name.endswith("_") and not name.startswith("_"))


def without_comment(line: str) -> str:
    """A source line without its trailing comment (the first `#` before which it parses)."""
    for at in (i for i, ch in enumerate(line) if ch == "#"):
        try:
            ast.parse(line[:at])
        except SyntaxError:
            continue
        return line[:at].rstrip()
    return line


class _InPlaceCalls(TorchFunctionMode):
    """Each in-place call on a tensor (a method ending in "_", an augmented assignment, an
    item assignment) made from the user's own lines."""

    def __init__(self, changes: list[_Change]) -> None:
        super().__init__()
        self.changes = changes

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None
                           ) -> Any:
        first = args[0] if args else None
        if isinstance(first, torch.Tensor) and len(self.changes) < MAX_CHANGES \
                and in_place(func):
            frame = user_frame()
            if frame is not None:
                self.changes.append(_Change(first, frame))
        return func(*args, **(kwargs or {}))


MAX_CHANGES = 10_000  # in-place calls watched in one forward (a model's every relu_)


def user_frame() -> traceback.FrameSummary | None:
    """The innermost frame of the stack that is the user's (not gradscope's, torch's or a
    library's it runs on)."""
    return next((f for f in reversed(traceback.extract_stack()) if users_file(f.filename)),
                None)


def users_file(path: str) -> bool:
    """Whether a frame's file is the user's (not gradscope's, torch's or a library's it runs
    on)."""
    return not path.startswith((*OURS, *LIBRARIES)) and f"{os.sep}torch{os.sep}" not in path


def _changer(message: str, changes: list[_Change]) -> _Change | None:
    """The in-place call that took the tensor torch names from the version autograd saved
    it at: the same shape, the same node that made it, found at that version."""
    found = CHANGED.search(message)
    if found is None:
        return None
    shape = tuple(int(d) for d in found.group(1).replace(" ", "").split(",") if d)
    node, version = found.group(2), int(found.group(3))
    alike = [c for c in changes if c.shape == shape and c.version == version]
    exact = [c for c in alike if c.node == node]
    # (an alias sharing its version counter — `y.detach().mul_(2)` — was made by no node)
    aliases = [c for c in alike if c.node is None]
    return exact[0] if exact else aliases[0] if len(aliases) == 1 else None


@contextmanager
def user_code(during: str, hint: Callable[[BaseException], str | None] | None = None
              ) -> Iterator[None]:
    """Run the user's code: anything it raises is a TargetError (exit 3), and so is leaving
    through sys.exit or os._exit (SystemExit is no Exception, and would end gradscope with the
    user's exit code: 0 on a failing check), and so is any BaseException of its own. Also
    wrapped around a whole run, where a SystemExit raised inside torch's autograd engine (a
    custom backward) arrives. A process the user's code forked ends when it returns here."""
    try:
        yield
    except (GradscopeError, Stopped, KeyboardInterrupt):
        raise
    except BaseException as exc:
        raise _left_or_raised(exc, during, hint) from exc
    finally:
        process.back_from_user()


def _left_or_raised(exc: BaseException, during: str,
                    hint: Callable[[BaseException], str | None] | None) -> TargetError:
    if isinstance(exc, Left):
        return user_error(exc, during, EXIT_HINT)
    if isinstance(exc, SystemExit):
        return user_error(exc, during, LEFT_HINT)
    return user_error(exc, during, hint(exc) if hint else None)


@contextmanager
def contained(during: str = "the check") -> Iterator[None]:
    """Around a whole run: only what escaped the narrower `user_code` (a SystemExit or a
    BaseException of the user's raised in a custom backward, inside torch's autograd engine)
    is turned into a TargetError, and an Exception raised in the user's own frames while
    gradscope read their objects (a `__str__` or `__getattr__` that raises); every other
    Exception keeps its meaning."""
    try:
        yield
    except (GradscopeError, Stopped, KeyboardInterrupt, GeneratorExit):
        raise
    except Exception as exc:
        if raised_by_user(exc):  # an odd object of the user's, read by gradscope (a key
            raise user_error(exc, during) from exc  # whose __str__ raises): exit 3
        raise
    except BaseException as exc:
        raise _left_or_raised(exc, during, None) from exc
    finally:
        process.back_from_user()


def raised_by_user(exc: BaseException) -> bool:
    """Whether the innermost frame of `exc` is the user's code (not gradscope's, torch's, the
    standard library's or another library gradscope runs on)."""
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and not frames[-1].filename.startswith((*OURS, *LIBRARIES))
