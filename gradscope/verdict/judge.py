"""The judge of one run: compares autograd with the other engines for any upstream, with the
masks finite differences carry (kinks, samples), the re-marking of surrogate elements (the
forward is flat there and autograd is not: whatever code made that gradient, it is a surrogate;
and every mismatch of an input the user declared a surrogate), the re-marking of vanishing
inputs the diagnoses decided, and the two-point estimates a comparison doubted.

It owns the work every named check shares and computes it once: the seeded random upstreams and
autograd's VJP for each, and the Jacobians of autograd and of the symbolic engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from gradscope.engines.fd import Estimate, FiniteDifferences
from gradscope.inputs.text import seed_for
from gradscope.report.status import MISMATCH, SURROGATE
from gradscope.verdict.compare import Comparison, compare
from gradscope.verdict.tolerance import Tolerance

RANDOM_UPSTREAMS = 2  # extra seeded upstream vectors behind every `check` verdict...
ONE_RANDOM_UPSTREAM_FROM = 1 << 16  # ...one for outputs this large: a single vector already
# weighs every output element independently, and a second costs a backward and compares


@dataclass
class Seen:
    """One comparison that found mismatches: autograd, its reference (symbolic, else finite
    differences with their error bound) and the statuses, before a declaration excused them."""

    name: str
    autograd: torch.Tensor
    reference: torch.Tensor | None
    error: torch.Tensor | None
    comparison: Comparison
    jacobian: bool


@dataclass
class Judge:
    """Compares per input; `autograd` and `symbolic` are the engines (symbolic may be None),
    `estimates` the finite-difference result per input (None where it did not run)."""

    names: tuple[str, ...]
    autograd: Any
    symbolic: Any
    fd: FiniteDifferences | None
    estimates: Mapping[str, Estimate | None]
    tol: Tolerance
    seed: int
    # input → why the user declared its gradient a surrogate (--surrogate, or a marker in code)
    declared: dict[str, str] = field(default_factory=dict)
    # input → elements where backward is not linear in grad_output: never a surrogate
    nonlinear: dict[str, torch.Tensor] = field(default_factory=dict)
    # input → its elements judged `surrogate` in any comparison (a Jacobian's by column)
    surrogate_elements: dict[str, torch.Tensor] = field(default_factory=dict)
    vanishing: set[str] = field(default_factory=set)
    # per input, the first comparison that had a mismatch before a declaration excused it
    # (the table's upstream, else a random one, else the Jacobian): what the relations
    # between autograd and its reference are read from
    seen: dict[str, Seen] = field(default_factory=dict)
    # two-point finite-difference estimates a comparison doubted: refined, then judged again
    suspects: dict[str, torch.Tensor] = field(default_factory=dict)
    _random: list[tuple[torch.Tensor, dict[str, torch.Tensor]]] = field(default_factory=list)
    _jacobian: tuple[Any, Any] | None = None
    _flat: dict[str, torch.Tensor | None] = field(default_factory=dict)
    # per input element: 0 not probed, 1 the output depends on it at other values (a step),
    # 2 it does not at any value tried (the forward ignores it)
    _depends: dict[str, torch.Tensor] = field(default_factory=dict)

    def stepped(self, name: str, candidates: torch.Tensor) -> torch.Tensor:
        """Of the flat `candidates` (input-shaped), those where the forward is piecewise
        constant: it moves when the element takes other values. Only those are surrogates; a
        forward that ignores an element at every value makes any gradient there a bug."""
        est = self.estimates[name]
        if self.fd is None or est is None:
            return torch.zeros_like(candidates)
        known = self._depends.setdefault(
            name, torch.zeros(est.in_shape, dtype=torch.int8, device=candidates.device))
        todo = torch.nonzero((candidates & (known == 0)).reshape(-1)).reshape(-1)
        if todo.numel():
            moves = self.fd.depends(name, todo)
            known.view(-1)[todo] = torch.where(moves, 1, 2).to(torch.int8)
        return candidates & (known == 1)

    def ignored(self, name: str) -> torch.Tensor | None:
        """Elements probed and found ignored by the forward (None: none probed)."""
        known = self._depends.get(name)
        return None if known is None else known == 2

    @property
    def surrogates(self) -> set[str]:
        """The inputs with a surrogate element."""
        return set(self.surrogate_elements)

    def flat(self, name: str) -> torch.Tensor | None:
        """Input-shaped mask of the elements where the forward does not move: finite
        differences estimated their column, it is zero within its error, and its stencil
        crossed no kink or jump (None: no estimate)."""
        if name not in self._flat:
            est = self.estimates[name]
            mask = None
            if est is not None:
                # "zero" is relative to the input's own derivatives: a model whose gradients
                # are 1e-8 everywhere has columns below atol that are not flat at all
                finite = est.partial[torch.isfinite(est.partial)]
                scale = float(finite.abs().max()) if finite.numel() else 0.0
                atol = self.tol.atol if scale <= self.tol.atol else \
                    min(self.tol.atol, self.tol.rtol * scale)
                mask = ~est.nonconstant(atol) & ~est.kink
                if est.checked is not None:
                    mask &= est.checked
                if name in self.nonlinear:
                    mask &= ~self.nonlinear[name].to(mask.device)
            self._flat[name] = mask
        return self._flat[name]

    def compare(self, name: str, ag: torch.Tensor, sym: torch.Tensor | None,
                fd: torch.Tensor | None, err: torch.Tensor | None,
                jacobian: bool = False) -> Comparison:
        """Compare one input's arrays: a VJP (input-shaped), or with `jacobian` its
        (out_numel, in_numel) Jacobian, whose columns carry the input's kink/sample masks."""
        est = self.estimates[name]
        kink = checked = None
        if est is not None:
            kink = est.kink.reshape(1, -1) if jacobian else est.kink
            if est.sampled is not None:
                checked = est.checked.reshape(1, -1) if jacobian else est.checked
        cmp = compare(ag, sym, fd, err, kink, self.tol, checked)
        if est is not None and est.points is not None and fd is not None:
            self._doubt(name, est, cmp, jacobian)
        flat = self.flat(name)
        if flat is not None and cmp.counts().get("mismatch") and bool(flat.any()):
            wrong = cmp.status == MISMATCH
            wrong = wrong.any(0).reshape(flat.shape) if jacobian else wrong.reshape(flat.shape)
            stepped = self.stepped(name, flat & wrong)
            cmp = cmp.surrogate(stepped.reshape(1, -1) if jacobian else stepped)
        if cmp.counts().get("mismatch"):
            self.seen.setdefault(name, Seen(name, ag, sym if sym is not None else fd,
                                            err if sym is None else None, cmp, jacobian))
            if name in self.declared:
                cmp = cmp.surrogate(torch.ones((), dtype=torch.bool))
        if cmp.counts().get("surrogate"):
            marked = cmp.status == SURROGATE
            marked = marked.any(0) if jacobian else marked
            shape = self.autograd.leaves[name].shape
            before = self.surrogate_elements.get(name)
            marked = marked.reshape(shape).to(torch.bool)
            self.surrogate_elements[name] = marked if before is None else before | marked
        if name in self.vanishing and not jacobian:  # zero Jacobian entries are ordinary
            cmp = cmp.vanishing(ag)
        return cmp

    def _doubt(self, name: str, est: Estimate, cmp: Comparison, jacobian: bool) -> None:
        """Remember the two-point estimates behind this comparison's mismatches."""
        if not cmp.counts().get("mismatch"):
            return
        mismatch = cmp.status == MISMATCH
        if jacobian:  # (out, in): a column is doubted when any of its entries is
            mismatch = mismatch.any(0)
        doubted = mismatch.reshape(est.points.shape).to(est.points.device) & (est.points == 2)
        if bool(doubted.any()):
            self.suspects[name] = self.suspects[name] | doubted if name in self.suspects \
                else doubted

    def refine_suspects(self) -> bool:
        """Four-point estimates for every doubted two-point one; True when any changed."""
        refined = 0
        for name, mask in self.suspects.items():
            refined += self.fd.refine(name, mask) if self.fd is not None else 0
        self.suspects = {}
        if refined:  # everything is judged again with the refined estimates
            self._flat, self.seen, self.surrogate_elements = {}, {}, {}
        return refined > 0

    def random_upstreams(self) -> list[tuple[torch.Tensor, dict[str, torch.Tensor]]]:
        """The seeded random upstream vectors and autograd's VJP for each, computed once."""
        if not self._random:
            output = self.autograd.output
            count = RANDOM_UPSTREAMS if output.numel() < ONE_RANDOM_UPSTREAM_FROM else 1
            for k in range(count):
                gen = torch.Generator().manual_seed(seed_for(self.seed, f":upstream{k}"))
                # uniform(-1, 1): mixed signs and scales, never larger than the ones upstream
                # whose absolute tolerance it shares; drawn in float32 (randn in float64
                # costs seven times as much at a million elements)
                v = torch.rand(output.shape, generator=gen).to(torch.float64)
                v = v.mul_(2.0).sub_(1.0).to(output.device)
                self._random.append((v, self.autograd.vjp(v.to(output.dtype))))
        return self._random

    def jacobians(self) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor] | None,
                                 dict[str, tuple[torch.Tensor, torch.Tensor] | None]]:
        """Autograd's and the symbolic engine's Jacobians, computed once, and the finite
        differences' (read fresh: refinement may still change them)."""
        if self._jacobian is None:
            autograd, symbolic = self.autograd, self.symbolic
            sym = None
            if symbolic is not None:
                n_out = autograd.output.numel()
                basis = torch.eye(n_out, dtype=torch.float64, device=autograd.output.device)
                rows = [symbolic.vjp(b.reshape(autograd.output.shape)) for b in basis]
                sym = {n: torch.stack([r[n].reshape(-1) for r in rows]) for n in self.names}
            self._jacobian = (autograd.jacobian(), sym)
        fd = {n: e.jacobian() if e else None for n, e in self.estimates.items()}
        return self._jacobian[0], self._jacobian[1], fd

    def jacobian_comparisons(self) -> dict[str, Comparison]:
        ag, sym, fd = self.jacobians()
        out = {}
        for n in self.names:
            jac, err = fd[n] if fd[n] else (None, None)
            out[n] = self.compare(n, ag[n], sym[n] if sym else None, jac, err, jacobian=True)
        return out
