"""The first stage of every command (check, jvp, jacobian, graph, sweep): the request's options
validated, its target resolved and made ready (converted, switched, wrapped for --order 2, its
output picked), and the inputs bound — every size checked before anything is computed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from gradscope import targets as registry
from gradscope.errors import GradscopeError, UsageError
from gradscope.evidence.exercise import exercised
from gradscope.evidence.fit import fitted
from gradscope.inputs.bind import DTYPES, Bound, Upstream, bind, defaulted, device_of
from gradscope.options import Options, Request
from gradscope.targets import SecondOrderTarget, Target, resolve
from gradscope.targets import mode as modes
from gradscope.targets.mode import Mode


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
    """The target — made ready, wrapped for --order 2 and for the run modes asked for — and
    its bound inputs."""
    options = request.options.validate()
    on = modes.asked(registry.MODES, options)  # (read at run time: a registration is there)
    options = modes.adjusted(on, options)
    builder = next((m for m in on if m.builds), None)
    if builder is not None:  # (a mode that builds its own target and binding)
        target, bound = builder.build(request, options)
        try:
            target = _wrapped(target, options, on)
            target.ready()
        except BaseException:
            target.finished()
            raise
        return Prepared(request, options, target, bound)
    target = resolve(request.target, args=options.arg, init=options.init, base=request.base,
                     imports=options.imports,
                     positional=request.positional)
    for mode in registry.MODES:  # (a mode the target needs, whatever the options say)
        why = mode.wanted_by(target)
        if why and not mode.asked(options):
            options = mode.asking(options)
            target.notes.append(why)
    options, lean = _fitting(options, target, on)
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
    target = _wrapped(target, options, on)
    bound = replace(bind(options, target, upstream), lean=lean)
    with shape_hint(bound):
        _bound_intermediates(target, bound, options.max_elements_total)
    target.ready()  # (every later stage reads the target; none changes it)
    narrowed = exercised(target, bound, options.seed)
    if narrowed is not None:  # (checked first; the default spread too, never dropped)
        return Prepared(request, options, target, narrowed, (bound,))
    return Prepared(request, options, target, bound)


def _wrapped(target: Target, options: Options, on: list[Mode]) -> Target:
    """`target` wrapped by each run mode the (adjusted) options ask for, in MODES order."""
    for mode in registry.MODES:
        if mode in on or (mode.asked(options) and not mode.builds):
            target = mode.wrap(target, options)
    return target


def _fitting(options: Options, target: Target, on: list[Mode]) -> tuple[Options, bool]:
    """The options in the parameters' own dtype, and True, where a float64 check of a model
    would not fit in the memory its device has (fit.py; said in a note)."""
    if options.order != 1 or not all(m.fits for m in on):
        return options, False
    fit = fitted(target.parameters, options.dtype, device_of(options.device))
    if fit is None:
        return options, False
    target.notes.append(fit.note)
    return options.updated(dtype=fit.dtype), True


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
