"""Hypothesis strategies shared by the tests: random expressions from the grammar."""

from __future__ import annotations

from hypothesis import strategies as st

# Smooth everywhere on the reals (denominators and log/sqrt arguments kept positive).
_UNARY = ["sin({})", "cos({})", "tanh({})", "sigmoid({})", "softplus({})", "atan({})",
          "erf({})", "exp(sin({}))", "sqrt(1 + ({})**2)", "log(1 + ({})**2)", "({})**2",
          "-({})", "expm1(tanh({}))", "log1p(sigmoid({}))", "cosh(tanh({}))",
          # torch spellings and the smooth rows of the wider table
          "F.gelu({})", "F.silu({})", "F.mish({})", "torch.asinh({})", "({}).square()",
          "F.logsigmoid({})", "torch.erfc({})", "F.gelu({}, approximate='tanh')",
          "F.tanhshrink({})", "({}).exp().log1p()", "torch.special.expit({})"]
_BINARY = ["({}) + ({})", "({}) - ({})", "({}) * ({})", "({}) / (1.5 + sin({}))",
           "atan2(1 + ({})**2, {})", "pow(1 + ({})**2, sin({}))",
           "torch.logaddexp({}, {})", "torch.hypot(1 + ({})**2, {})",
           "F.mse_loss({}, {}, reduction='none')"]
_REDUCE = ["sum({})", "mean({})", "logsumexp({})", "softmax({})", "norm(1 + ({})**2)",
           "prod(sigmoid({}))", "({}).sum(-1, keepdim=True)", "F.log_softmax({}, -1)",
           "torch.var({}, correction=0)", "F.softmin({}, -1)", "torch.cumsum({}, -1)",
           "F.normalize(1 + ({})**2, dim=-1)", "torch.logcumsumexp({}, -1)"]


@st.composite
def smooth(draw, depth=3):
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(["x", "y", "x", "y", "0.5", "2"]))
    kind = draw(st.integers(0, 9))
    if kind < 5:
        return draw(st.sampled_from(_UNARY)).format(draw(smooth(depth - 1)))
    if kind < 9:
        return draw(st.sampled_from(_BINARY)).format(draw(smooth(depth - 1)),
                                                     draw(smooth(depth - 1)))
    return draw(st.sampled_from(_REDUCE)).format(draw(smooth(depth - 1)))
