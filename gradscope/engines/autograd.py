"""The autograd engine: what PyTorch itself computes, the way a user would ask for it.

`backward(v)` is literally `y.backward(v)` followed by reading `.grad` of each leaf (seeds/003);
further upstream vectors go through `torch.autograd.grad` on the retained graph, the Jacobian
through batched vector-Jacobian products, and forward mode through `torch.func.jvp`.

A graph may serve one backward only: a custom Function can free what it saved once its backward
ran (a checkpointing Function does, on purpose). When a second backward on the retained graph
raises, every further one gets a fresh forward — gradscope's own re-runs never break correct
code; `fresh_vjp` always takes one (a determinism check must not replay a graph).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

import torch

from gradscope.errors import GradscopeError, UsageError
from gradscope.tensors import compiled_inside, gap

Forward = Callable[[Mapping[str, torch.Tensor]], torch.Tensor]
# a batched backward agrees with a plain one where they differ by no more than this many units
# of the output's dtype, times the largest gradient (a batched op sums in another order)
AGREED_ULPS = 1000


class AutogradEngine:
    def __init__(self, forward: Forward, values: Mapping[str, torch.Tensor],
                 copy: bool = True, shared: Collection[str] = (),
                 reinstate: Callable[[Mapping[str, torch.Tensor]], None] | None = None
                 ) -> None:
        """`copy`: the leaves get their own storage, so code that writes into its inputs
        cannot change the values the other engines see (not needed for torch expressions);
        `shared`: names whose leaves share the values' storage all the same (a module's
        parameters, which a forward does not write into: a copy of them is a copy of the
        model); `reinstate(leaves)`: called before each backward of the retained graph, so
        that the user's objects hold what they held in its forward (a module's parameters,
        which a backward that re-runs the module reads)."""
        self.forward = forward
        self.reinstate = reinstate or (lambda _values: None)
        self.names = list(values)
        self.leaves = {n: (v.detach().clone() if copy and n not in shared else v.detach()
                           ).requires_grad_(True) for n, v in values.items()}
        out = forward(self.leaves)
        if not isinstance(out, torch.Tensor):
            raise UsageError(f"the target returned {type(out).__name__}, not a tensor")
        if not out.is_floating_point():
            raise UsageError(f"the output has dtype {out.dtype}; gradients need a floating "
                             "point output")
        if not out.requires_grad:
            raise UsageError("the output does not depend differentiably on any input (only "
                             "through comparisons or constants), so backward has nothing to do")
        self.output = out
        # torch.compile'd code in the graph (read once; the stages ask it of `compiled`)
        self.compiled = compiled_inside(out)
        # a second backward on this graph raised, or a compiled graph that may donate its
        # buffers to its one backward: every backward then runs on a fresh forward's graph,
        # without retain_graph
        self.single_use = self.compiled
        # batched backwards (vmap over the upstream) are a shortcut: proven once against a
        # plain backward of the same upstream, or given up with how they disagreed
        self.rows_proven = False
        self.batched_apart: str | None = None
        # (first label, again label, first answer, again answer) of one question asked twice
        # whose answers differ: a backward that depends on the call (judged by the caller)
        self.apart: list[tuple[str, str, dict[str, torch.Tensor], dict[str, torch.Tensor]]] = []

    def backward(self, upstream: torch.Tensor) -> dict[str, torch.Tensor]:
        """Exactly `y.backward(upstream)`; an input the graph never reached gets zeros."""
        for leaf in self.leaves.values():
            leaf.grad = None
        self.reinstate(self.leaves)
        self.output.backward(upstream, retain_graph=not self.single_use)
        return self._taken()

    def accumulate(self, upstream: torch.Tensor, times: int) -> dict[str, torch.Tensor]:
        """`.grad` after `times` calls of `y.backward(upstream, retain_graph=True)`, never
        zeroed in between: what a training loop without zero_grad() sees."""
        for leaf in self.leaves.values():
            leaf.grad = None
        for _ in range(times):
            self._replayed(lambda out: out.backward(upstream,
                                                    retain_graph=not self.single_use))
        return self._taken()

    def _taken(self) -> dict[str, torch.Tensor]:
        """Each leaf's `.grad`, taken from it (never copied: a model's gradient is a copy of
        the model; the next backward starts from None, so nothing writes into these)."""
        out = {}
        for n, leaf in self.leaves.items():
            out[n] = stored(leaf.grad.detach()) if leaf.grad is not None else \
                torch.zeros_like(leaf.detach())
            leaf.grad = None
        return out

    def vjp(self, upstream: torch.Tensor, only: Collection[str] | None = None
            ) -> dict[str, torch.Tensor]:
        """vᵀJ for every input (`only`: for those inputs alone — a model's few sampled
        tensors, without a gradient of every other parameter)."""
        if only is None:
            return self._named(self._replayed(lambda out: self._grad(out, upstream)))
        names = [n for n in self.names if n in only]
        if not names:
            return {}
        leaves = [self.leaves[n] for n in names]
        grads = self._replayed(lambda out: torch.autograd.grad(
            out, leaves, upstream, retain_graph=not self.single_use, allow_unused=True))
        return {n: (stored(g.detach()) if g is not None else torch.zeros_like(leaf.detach()))
                for n, leaf, g in zip(names, leaves, grads, strict=True)}

    def fresh_vjp(self, upstream: torch.Tensor) -> dict[str, torch.Tensor]:
        """A VJP through a graph of its own: a fresh forward, then its one backward."""
        return self._named(self._grad(self.forward(self.leaves), upstream))

    def _grad(self, out: torch.Tensor, upstream: torch.Tensor) -> tuple:
        return torch.autograd.grad(out, list(self.leaves.values()), upstream,
                                   retain_graph=not self.single_use, allow_unused=True)

    def _named(self, grads: tuple) -> dict[str, torch.Tensor]:
        return {n: (stored(g.detach()) if g is not None else torch.zeros_like(leaf.detach()))
                for (n, leaf), g in zip(self.leaves.items(), grads, strict=True)}

    def _replayed(self, call: Callable[[torch.Tensor], object]) -> object:
        """`call` on the retained graph; once that raised, on a fresh forward's graph (an
        error there is the backward's own, and propagates)."""
        if not self.single_use:
            try:
                self.reinstate(self.leaves)
                return call(self.output)
            except (GradscopeError, SystemExit):
                raise
            except Exception:  # the graph served its one backward (saved state freed)
                self.single_use = True
        return call(self.forward(self.leaves))

    def jacobian(self) -> dict[str, torch.Tensor]:
        """Each input's Jacobian as an (out_numel, in_numel) matrix, from batched VJPs."""
        n_out = self.output.numel()
        rows = self._rows(0, n_out)
        assert rows is not None
        out = {}
        for (n, leaf), r in zip(self.leaves.items(), rows, strict=True):
            if r is None:
                r = torch.zeros(n_out, *leaf.shape, dtype=leaf.dtype, device=leaf.device)
            out[n] = r.detach().reshape(n_out, leaf.numel())
        return out

    def nonzero(self, batched_only: bool, entries: int = 1 << 22
                ) -> dict[str, torch.Tensor] | None:
        """Where each input's Jacobian is nonzero or NaN, (out_numel, in_numel) booleans, from
        batched VJPs over blocks of output elements (`entries` per block, so a large Jacobian
        is never held in floats); one backward per output element where batching fails, or
        None then with `batched_only`."""
        n_out = self.output.numel()
        widest = max(leaf.numel() for leaf in self.leaves.values())
        step = max(1, entries // max(1, widest))
        parts: dict[str, list[torch.Tensor]] = {n: [] for n in self.names}
        for start in range(0, n_out, step):
            k = min(step, n_out - start)
            rows = self._rows(start, k, batched_only)
            if rows is None:
                return None
            for (n, leaf), r in zip(self.leaves.items(), rows, strict=True):
                parts[n].append(torch.zeros(k, leaf.numel(), dtype=torch.bool,
                                            device=leaf.device) if r is None
                                else ((r != 0) | r.isnan()).reshape(k, leaf.numel()))
        return {n: torch.cat(p) for n, p in parts.items()}

    def _rows(self, start: int, k: int, batched_only: bool = False) -> tuple | None:
        """The VJPs of output elements start … start+k−1 (one per basis vector), per input
        (None: an input the graph never reached): batched, else one backward per element —
        or None where batching fails and `batched_only`."""
        n_out, device = self.output.numel(), self.output.device
        basis = torch.zeros(k, n_out, dtype=self.output.dtype, device=device)
        basis[torch.arange(k, device=device), torch.arange(start, start + k, device=device)] = 1
        basis = basis.reshape(k, *self.output.shape)
        rows = None if self.single_use else self._batched_rows(basis)
        if rows is None and not batched_only:
            per_row = [self.vjp(b) for b in basis]
            rows = tuple(torch.stack([r[n] for r in per_row]) for n in self.names)
        return rows

    def _batched_rows(self, basis: torch.Tensor) -> tuple | None:
        """All VJPs of `basis` in one batched backward on the retained graph; None where that
        fails (no batching rule for some op, or a graph of one backward)."""
        if self.batched_apart is not None:
            return None
        try:
            self.reinstate(self.leaves)
            rows = torch.autograd.grad(self.output, list(self.leaves.values()), basis,
                                       retain_graph=True, allow_unused=True,
                                       is_grads_batched=True)
            rows = tuple(r if r is None else stored(r) for r in rows)
        except (GradscopeError, SystemExit):
            raise
        except Exception:
            return None
        if self.rows_proven:
            return rows
        return self._proven_rows(basis, rows)

    def _proven_rows(self, basis: torch.Tensor, rows: tuple) -> tuple | None:
        """`rows` where the batched backward's first row is what a plain backward of that
        upstream gives (within round-off). Where it is not, the batch is asked once more: a
        second batch that agrees is the first's call gone wrong (a pair of calls for the
        determinism check), one that disagrees again is the batched rule's own (batched rows
        are given up for good: None)."""
        plain = self.vjp(basis[0])
        if self._agrees(rows, plain):
            self.rows_proven = True
            return rows
        # (each asked once more: whichever call went wrong shows as a pair that differs)
        plain_again, again = self.vjp(basis[0]), self._batched_again(basis)
        if not self._agrees(plain_again, plain):
            self.apart.append(("a plain backward of the Jacobian's first row",
                               "the same asked again", plain, plain_again))
        if again is not None and not self._agrees(rows, self._first_row(again)):
            self.apart.append(("autograd's batched backward (its first row)",
                               "the same batch asked again", self._first_row(rows),
                               self._first_row(again)))
        if again is not None and self._agrees(again, plain_again):
            self.rows_proven = True
            return again
        top, scale = self._gap(rows, plain)
        self.batched_apart = (f"autograd's batched backward (vmap over the upstream) disagreed "
                              f"with a plain backward of the same upstream (by up to "
                              f"{top:.3g}, of values up to {scale:.3g})")
        return None

    def _batched_again(self, basis: torch.Tensor) -> tuple | None:
        try:
            self.reinstate(self.leaves)
            rows = torch.autograd.grad(self.output, list(self.leaves.values()), basis,
                                       retain_graph=True, allow_unused=True,
                                       is_grads_batched=True)
        except (GradscopeError, SystemExit):
            raise
        except Exception:
            return None
        return tuple(r if r is None else stored(r) for r in rows)

    def _first_row(self, rows: tuple) -> dict[str, torch.Tensor]:
        return {n: torch.zeros_like(leaf.detach()) if r is None else r[0]
                for (n, leaf), r in zip(self.leaves.items(), rows, strict=True)}

    def _gap(self, rows: tuple | Mapping[str, torch.Tensor], plain: Mapping[str, torch.Tensor]
             ) -> tuple[float, float]:
        top, scale = 0.0, 1.0
        first = rows if isinstance(rows, Mapping) else self._first_row(rows)
        for name, got in first.items():
            found = gap(got, plain[name])
            top, scale = max(top, found[0]), max(scale, found[1])
        return top, scale

    def _agrees(self, rows: tuple | Mapping[str, torch.Tensor],
                plain: Mapping[str, torch.Tensor]) -> bool:
        """Whether a batched backward's first row (or a plain answer) is `plain` within
        round-off."""
        top, scale = self._gap(rows, plain)
        return top <= AGREED_ULPS * torch.finfo(self.output.dtype).eps * scale

    def jvp(self, tangents: Mapping[str, torch.Tensor]) -> torch.Tensor:
        primals = tuple(leaf.detach() for leaf in self.leaves.values())
        tans = tuple(tangents.get(n, torch.zeros_like(p)).to(p.dtype)
                     for n, p in zip(self.names, primals, strict=True))

        def f(*xs: torch.Tensor) -> torch.Tensor:
            return self.forward(dict(zip(self.names, xs, strict=True)))

        _, out = torch.func.jvp(f, primals, tans)
        return stored(out.detach())


def stored(g: torch.Tensor) -> torch.Tensor:
    """A gradient with storage: torch answers some backwards (sgn's) with a zero tensor that
    has none, which cannot be read element by element."""
    if g.numel() and g.data_ptr() == 0:
        return torch.zeros(g.shape, dtype=g.dtype, device=g.device)
    return g
