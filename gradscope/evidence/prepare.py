"""The first stage of every command (check, jvp, jacobian, graph, sweep): the request's options
validated, its target resolved and made ready (converted, switched, wrapped for --order 2, its
output picked), and the inputs bound — every size checked before anything is computed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

import torch

from gradscope.errors import GradscopeError, UsageError
from gradscope.evidence.exercise import exercised
from gradscope.evidence.fit import fitted
from gradscope.inputs.bind import DTYPES, Bound, Upstream, bind, defaulted, device_of
from gradscope.inputs.text import InputValue
from gradscope.options import Options, Request
from gradscope.targets import SecondOrderTarget, Target, resolve


@dataclass(frozen=True)
class Prepared:
    """What a run works on: the request, its validated options, the ready target and its
    bound inputs (with the upstream the table shows). `draws`: other bindings the check runs
    at too (the default spread, where the drawn inputs were narrowed: exercise.py) — one
    failing fails the run."""

    request: Request
    options: Options
    target: Target
    bound: Bound
    draws: tuple[Bound, ...] = ()

    def at(self, bound: Bound) -> Prepared:
        """The same run at another binding (one of `draws`), which has no draws of its own."""
        return replace(self, bound=bound, draws=())


# The sum of an expression's intermediates is limited to this many times --max-elements-total.
# Measured at the default 20,000,000 input elements (peak RSS of `gradscope check`): sin(x)
# 3.7 GB, sin nested 4 deep (80M) 4.1 GB, sum(sin(x)**2) * mean(cos(x)) (60M) 4.3 GB, and sin
# nested 10 deep (200M, now refused) 5.9 GB: past 4× a deep expression costs more than any
# shallow one at the limit.
INTERMEDIATES = 4


def prepare(request: Request) -> Prepared:
    """The target (wrapped for --order 2) and its bound inputs."""
    options = request.options.validate()
    if options.autocast is not None:
        options = _autocast_options(options)
    if options.compile is not None and options.nproc:
        raise UsageError("--compile is not combined with --nproc: check the compiled target "
                         "in one process")
    if options.nproc:
        return _distributed(request, options)
    for given, flag in ((options.context, "--context"), (options.sharded, "--sharded"),
                        (options.replicated, "--replicated"),
                        (options.after_backward, "--after-backward"),
                        (options.partial_grad, "--partial-grad"),
                        (options.compare_single, "--compare-single")):
        if given:
            raise UsageError(f"{flag} is for distributed code: give --nproc N too")
    target = resolve(request.target, args=options.arg, init=options.init, base=request.base,
                     imports=options.imports,
                     positional=request.positional)
    if options.compile is not None:  # (after the target's file: it may register a backend)
        _compilable(options)
    if target.precompiled and not options.plain:
        options = options.updated(plain=True)
        target.notes.append("the target is already compiled (torch.compile): gradscope calls "
                            "it only the plain way — grad mode, its inputs requiring grad, as "
                            "torch's gradcheck does — so dynamo compiles it once, not once "
                            "per mode (no_grad, vmap, watched forwards)")
    options, lean = _fitting(options, target)
    # a module in another dtype is checked on a converted copy, in the mode asked for
    target.convert(DTYPES[options.dtype], device_of(options.device))
    target.set_mode(options.mode)
    target.stated.update({*options.at, *options.shape})
    upstream = Upstream.read(options)
    if options.order == 2:
        # --grad is the inner upstream; the outer one, whose VJP is checked, is ones
        target = SecondOrderTarget(target, upstream)
        upstream, options = Upstream(), options.updated(grad=None)
    if options.output_index is not None and options.output_key is not None:
        raise UsageError("--output-index and --output-key both pick the output: give one")
    choice = options.output_index if options.output_index is not None else options.output_key
    if choice is not None:
        target.pick_output(choice)
    if options.autocast is not None:
        from gradscope.targets.autocast import Autocast

        target.set_autocast(Autocast(device_of(options.device).type, options.autocast))
    bound = replace(bind(options, target, upstream), lean=lean)
    with shape_hint(bound):
        _bound_intermediates(target, bound, options.max_elements_total)
    target.ready()  # (every later stage reads the target; none changes it)
    narrowed = exercised(target, bound, options.seed)
    if narrowed is not None:  # (checked first; the default spread too, never dropped)
        return Prepared(request, options, target, narrowed, (bound,))
    return Prepared(request, options, target, bound)


def _fitting(options: Options, target: Target) -> tuple[Options, bool]:
    """The options in the parameters' own dtype, and True, where a float64 check of a model
    would not fit in the memory its device has (fit.py; said in a note)."""
    if options.autocast is not None or options.order != 1 or options.compile is not None:
        return options, False
    fit = fitted(target.parameters, options.dtype, device_of(options.device))
    if fit is None:
        return options, False
    target.notes.append(fit.note)
    return options.updated(dtype=fit.dtype), True


def _autocast_options(options: Options) -> Options:
    """--autocast: float32 inputs (float64 is not autocast-eligible), one process, order 1."""
    for given, flag in ((options.order == 2, "--order 2"), (options.nproc, "--nproc"),
                        (options.compile is not None, "--compile")):
        if given:
            raise UsageError(f"--autocast is not combined with {flag}: check the "
                             "mixed-precision forward's first-order gradients on its own")
    if options.dtype not in ("float64", "float32"):
        raise UsageError(f"--autocast runs float32 inputs (autocast lowers them itself); "
                         f"leave out --dtype {options.dtype}")
    return options.updated(dtype="float32")


def _compilable(options: Options) -> None:
    """--compile's backend is one torch knows, and the check is one it fits."""
    from gradscope.evidence.compiled import backend_of  # (imports torch._dynamo: only here)

    backend_of(options.compile or "")
    if options.order == 2:
        raise UsageError("--compile checks first-order gradients: AOTAutograd has no double "
                         "backward, so leave out --order 2")


# seconds a collective waits for the other ranks before the check ends on every rank
COLLECTIVE_TIMEOUT = 60.0


def _distributed(request: Request, options: Options) -> Prepared:
    """--nproc N: the ranks started, each building the target and binding its inputs as one
    process would; the coordinator sees them as one target, evaluated the plain way (each
    evaluation an ordinary call on every rank)."""
    if request.command not in ("check", "jvp", "jacobian") or not isinstance(request.target,
                                                                             str):
        raise UsageError("--nproc runs FILE.py:NAME targets of check, jvp and jacobian")
    if options.order == 2 or options.tangent or options.device != "cpu":
        raise UsageError("--nproc checks first-order gradients on the CPU (gloo): leave out "
                         "--order 2, --tangent and --device")
    from gradscope.distributed import start

    target = start(request.target, str(request.base) if request.base else None, options,
                   COLLECTIVE_TIMEOUT)
    try:
        dtype = DTYPES[options.dtype]
        values = {n: InputValue(t.detach().to(torch.float64), target.origins[n])
                  for n, t in target.given.items()}
        bound = Bound(values, {n: v.tensor.to(dtype) for n, v in values.items()},
                      Upstream.read(options), None, dtype, torch.device("cpu"))
        target.ready()
    except BaseException:
        target.finished()
        raise
    return Prepared(request, options.updated(plain=True), target, bound)


@contextmanager
def shape_hint(bound: Bound) -> Iterator[None]:
    """An error about shapes while inputs had the default shape names them: the user did not
    choose (3,), and the error would otherwise blame their code or their expression."""
    try:
        yield
    except GradscopeError as exc:
        names = defaulted(bound)
        if not names or not exc.about_shapes:
            raise
        given = ", ".join(f"{n} had {tuple(bound.cast[n].shape)}" for n in names)
        how = " ".join(f"--shape {n}=…" for n in names)
        raise exc.with_hint(f"hint: the default shape was used, nobody's choice ({given}); "
                            f"pass {how} (or --at)") from exc


def _bound_intermediates(target: Target, bound: Bound, limit: int) -> None:
    """Outputs and intermediates are bounded like inputs, before anything is computed: a
    broadcast (8000×1 + 1×8000) or an outer product can make far more than it is given. And
    their sum is bounded (by INTERMEDIATES × the limit): autograd keeps most of them for
    backward, so a deep expression holds many values of the input's size at once."""
    sizes = target.sizes({n: tuple(t.shape) for n, t in bound.cast.items()})
    if sizes.largest > limit:
        raise UsageError(f"`{sizes.where}` would make {sizes.largest:,} elements (shape "
                         f"{sizes.shape}) from these inputs; outputs and intermediates are "
                         f"limited like inputs to {limit:,} (--max-elements-total)")
    if sizes.total > INTERMEDIATES * limit:
        raise UsageError(f"the expression would make {sizes.total:,} elements in all from "
                         f"these inputs (its output and intermediates, which autograd keeps "
                         f"for backward); their sum is limited to {INTERMEDIATES * limit:,} "
                         f"({INTERMEDIATES} × --max-elements-total): give smaller inputs "
                         "(--shape), or raise --max-elements-total if the memory is there")
