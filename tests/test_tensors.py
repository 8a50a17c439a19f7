"""Shape and finiteness helpers shared by the engines."""

from __future__ import annotations

import math
import weakref

import torch

from gradscope.tensors import (
    all_finite,
    any_to_shape,
    moved_by,
    same_gradient,
    sum_to_shape,
    ulp_signs,
)


def test_all_finite_fast_path_and_exact_fallback():
    assert all_finite(torch.tensor([1.0, -2.0]))
    assert not all_finite(torch.tensor([1.0, float("nan")]))
    assert not all_finite(torch.tensor([float("inf"), -float("inf")]))
    assert all_finite(torch.tensor([1e308, 1e308], dtype=torch.float64))  # the sum overflows
    assert all_finite(torch.tensor([60000.0, 60000.0], dtype=torch.float16))
    assert all_finite(torch.tensor([1, 2])) and all_finite(torch.tensor([]))


def test_sum_and_any_to_shape_undo_broadcasting():
    t = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    assert sum_to_shape(t, (3,)).tolist() == [3.0, 5.0, 7.0]
    assert sum_to_shape(t, (2, 1)).tolist() == [[3.0], [12.0]]
    assert sum_to_shape(t, (2, 3)) is t
    mask = torch.tensor([[False, True, False], [False, False, False]])
    assert any_to_shape(mask, (3,)).tolist() == [False, True, False]


def test_branch_changed_treats_nan_as_the_same_branch():
    from gradscope.tensors import branch_changed

    a = torch.tensor([1.0, float("nan"), 2.0])
    assert branch_changed(a, torch.tensor([1.0, float("nan"), 3.0])).tolist() == [
        False, False, True]
    assert not bool(branch_changed(a, a).any())


def test_grad_nodes_visits_every_node_once():
    from gradscope.tensors import grad_nodes

    x = torch.ones(2, requires_grad=True)
    shared = x.sin()
    out = (shared * shared).sum()  # `shared` is reached twice
    names = [n.name() for n in grad_nodes(out.grad_fn)]
    assert names[0] == "SumBackward0" and names.count("SinBackward0") == 1
    assert names.count("torch::autograd::AccumulateGrad") == 1
    assert list(grad_nodes(None)) == []


def test_inputs_are_moved_by_their_last_bits_in_seeded_directions():
    values = {"x": torch.tensor([1.0, -2.0, 4.0], dtype=torch.float64),
              "k": torch.tensor([1, 2, 3])}
    signs = ulp_signs(values)
    assert set(signs) == {"x"} and torch.equal(signs["x"].abs(), torch.ones(3, dtype=torch.float64))
    assert torch.equal(signs["x"], ulp_signs(values)["x"])  # seeded: the same every time
    moved = moved_by(values, 1e-3, signs)
    assert torch.allclose(moved["x"] - values["x"], 1e-3 * values["x"].abs() * signs["x"])
    assert moved["k"] is values["k"]
    # drawn one tensor at a time when none are given: the very same signs
    two = {"a": torch.ones(5, dtype=torch.float64), "k": values["k"], "b": -torch.ones(4)}
    drawn = ulp_signs(two)
    assert all(torch.equal(moved_by(two, 0.5)[n], moved_by(two, 0.5, drawn)[n]) for n in two)


def test_a_triangle_stands_for_a_symmetric_matrix_and_its_adjoint_counts_entries_twice():
    from gradscope.tensors import from_triangle, triangle_adjoint

    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert from_triangle(a, upper=False).tolist() == [[1.0, 3.0], [3.0, 4.0]]
    assert from_triangle(a, upper=True).tolist() == [[1.0, 2.0], [2.0, 4.0]]
    g = torch.tensor([[1.0, 5.0], [5.0, 2.0]])
    assert triangle_adjoint(g, upper=False).tolist() == [[1.0, 0.0], [10.0, 2.0]]


def test_a_plain_value_is_an_ordinary_calls_in_grad_mode_without_a_graph():
    from gradscope.tensors import as_leaves, plain_value

    def hooked(values):
        y = values["x"] * 3
        y.register_hook(lambda g: g)  # (needs grad mode and an input that requires grad)
        return y

    x = torch.ones(2)
    with torch.no_grad():
        out = plain_value(hooked, {"x": x, "k": torch.arange(2)})
    assert out.tolist() == [3.0, 3.0] and not out.requires_grad and not x.requires_grad
    leaves = as_leaves({"x": x, "k": torch.arange(2)})
    assert leaves["x"].requires_grad and not leaves["k"].requires_grad


def test_compiled_inside_sees_aotautograds_backward_in_the_graph():
    from gradscope.tensors import compiled_inside

    x = torch.ones(3, requires_grad=True)
    assert not compiled_inside(x.sin())
    assert compiled_inside(torch.compile(torch.sin, backend="aot_eager")(x))
    assert not compiled_inside(torch.ones(2))


class _Node:
    """A graph node: its Python object lives only while referenced and a new one is made on
    the next access, as torch does for a grad_fn whose object died."""

    def __init__(self, key, graph, cache):
        self.key, self._graph, self._cache = key, graph, cache

    @property
    def next_functions(self):
        return tuple((_wrapper(k, self._graph, self._cache), 0) for k in self._graph[self.key])


def _wrapper(key, graph, cache):
    found = cache.get(key)
    node = found() if found is not None else None
    if node is None:
        node = _Node(key, graph, cache)
        cache[key] = weakref.ref(node)
    return node


def test_grad_nodes_holds_what_it_saw_so_that_no_new_object_shares_a_dead_ones_id():
    # a chain of 400 nodes, each read once and dropped by the caller: without holding them,
    # a new node object lands at a freed one's address and is skipped as seen
    from gradscope.tensors import grad_nodes

    graph = {k: [k + 1] if k < 399 else [] for k in range(400)}
    seen = [node.key for node in grad_nodes(_wrapper(0, graph, {}))]
    assert seen == list(range(400))


def test_a_scalar_expanded_to_a_shape_is_one_stored_value():
    from gradscope.tensors import broadcast

    assert broadcast(torch.zeros(()).expand(4, 5))
    assert not broadcast(torch.zeros(4, 5)) and not broadcast(torch.zeros(4, 1).expand(4, 5))
    assert not broadcast(torch.zeros(0))


def test_moved_by_a_scratch_gives_the_same_copies_as_views_written_over_by_the_next_call():
    from gradscope.tensors import moved_by

    values = {"a": torch.randn(50, dtype=torch.float64), "b": torch.randn(3, 4),
              "n": torch.arange(3)}
    scratch: dict[str, torch.Tensor] = {}
    up = moved_by(values, 1e-3, scratch=scratch)
    assert all(torch.equal(up[k], moved_by(values, 1e-3)[k]) for k in values)
    held = {k: up[k].clone() for k in ("a", "b")}
    down = moved_by(values, -1e-3, scratch=scratch)
    assert torch.equal(down["a"], moved_by(values, -1e-3)["a"])
    assert down["a"] is not up["a"] and torch.equal(up["a"], down["a"])  # (written over)
    assert not torch.equal(held["a"], down["a"]) and down["n"] is values["n"]
    # |v|·sign: moved by exactly relative·|v| in a ±1 direction
    step = (held["a"] - values["a"]) / values["a"].abs()
    assert torch.allclose(step.abs(), torch.full_like(step, 1e-3))


def test_max_abs_difference_a_block_at_a_time_is_the_whole_ones():
    from gradscope import tensors

    gen = torch.Generator().manual_seed(1)
    n = 3 * tensors.DIFFERENCE_BLOCK + 17  # (a last block of its own size)
    a = torch.randn(n, generator=gen, dtype=torch.float64)
    b = a + 1e-9 * torch.randn(n, generator=gen, dtype=torch.float64)
    b[n - 5] += 0.25  # in the short last block
    assert tensors.max_abs_difference(a, b) == float((a - b).abs().max())
    assert tensors.max_abs_difference(a.float(), b) == float((a.float() - b).abs().max())
    b[7] = float("nan")
    assert math.isnan(tensors.max_abs_difference(a, b))
    small = torch.tensor([1.0, -2.0])
    assert tensors.max_abs_difference(small, torch.zeros(2)) == 2.0
    wide = a[:3 * tensors.DIFFERENCE_BLOCK].reshape(-1, 3)[:, ::2]  # (not contiguous)
    assert tensors.max_abs_difference(wide, wide * 0) == float(wide.abs().max())


def test_same_gradient_is_equality_or_no():
    g = torch.tensor([1.0, -0.0, 3.0], dtype=torch.float64)
    assert same_gradient(g.clone(), g) and same_gradient(torch.tensor([1.0, 0.0, 3.0],
                                                                      dtype=torch.float64), g)
    assert not same_gradient(g + 1e-16 * torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)
                             + torch.tensor([0.0, 0.0, 4e-16], dtype=torch.float64), g)
    assert not same_gradient(g.float(), g) and not same_gradient(g[:2], g)
    nan = torch.tensor([float("nan")])
    assert not same_gradient(nan.clone(), nan)  # (a NaN says nothing: the caller runs its own)
    assert same_gradient(None, torch.zeros(2)) and not same_gradient(None, torch.ones(2))


def test_readable_says_whether_a_tensors_storage_holds_what_it_addresses():
    from gradscope.tensors import readable

    x = torch.randn(4, 3)
    assert readable(x) and readable(x[1:, ::2]) and readable(torch.zeros(0))
    freed = torch.randn(4)
    alias = freed.detach()
    freed.untyped_storage().resize_(0)  # (a reversible network's way with its input)
    assert not readable(alias) and not readable(freed)


def test_an_own_copy_is_differentiable_and_graphs_look_through_its_node():
    from gradscope.tensors import grad_nodes, own_copy, own_node, through_own

    leaf = torch.randn(3, requires_grad=True)
    copied = own_copy(leaf)
    assert copied.data_ptr() != leaf.data_ptr() and own_node(copied.grad_fn)
    out = (copied * 2).sum()
    (grad,) = torch.autograd.grad(out, leaf)
    assert torch.equal(grad, torch.full((3,), 2.0))
    mul = out.grad_fn.next_functions[0][0]
    (below,) = through_own([c for c, _ in mul.next_functions if c is not None])
    assert type(below).__name__ == "AccumulateGrad" and below.variable is leaf
    assert not any(own_node(n) for n in grad_nodes((leaf * 2).grad_fn))
    plain = own_copy(torch.ones(2))
    assert plain.grad_fn is None and not plain.requires_grad


def test_differing_lists_only_the_elements_two_answers_disagree_at():
    from gradscope.tensors import differing

    first = torch.tensor([1.0, float("nan"), 3.0, 4.0])
    at, gap = differing(first, torch.tensor([1.0, float("nan"), 3.5, float("nan")]))
    assert at.tolist() == [2, 3] and gap[0] == 0.5 and gap[1] > 1e300
    at, _ = differing(torch.zeros(3), None)  # (an unused input: its zeros)
    assert at.numel() == 0


def test_gap_reads_a_difference_against_the_larger_of_one_and_the_wanted_scale():
    from gradscope.tensors import gap

    assert gap(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5])) == (0.5, 2.5)
    top, scale = gap(torch.tensor([float("nan")]), torch.tensor([0.1]))
    assert top == float("inf") and scale == 1.0


def test_the_same_infinity_in_both_places_is_agreement_opposite_ones_are_not():
    from gradscope.tensors import gap

    inf = float("inf")
    assert gap(torch.tensor([-inf, 1.0]), torch.tensor([-inf, 1.0]))[0] == 0.0
    assert gap(torch.tensor([inf]), torch.tensor([-inf]))[0] > 1e300
    assert gap(torch.tensor([inf]), torch.tensor([1.0]))[0] > 1e300
