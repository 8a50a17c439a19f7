"""Custom gradients as they are written in public code (straight-through quantizers, binarizers,
spiking surrogates, gradient reversal, PACT, LSQ, memory-efficient activations, hand-written
backwards), each correct, a deliberate surrogate, or carrying one realistic bug.

The expected verdict of every entry is in tests/runner/test_corpus.py. Nothing here imports
gradscope: these are the user's files.
"""

import math

import torch
import torch.nn.functional as F


# --------------------------------------------------------------------- correct, smooth
class MemoryEfficientSwish(torch.autograd.Function):
    """EfficientNet-PyTorch's Swish: x·σ(x), backward recomputes σ."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return grad_output * (s * (1 + x * (1 - s)))


class MishFunction(torch.autograd.Function):
    """x·tanh(softplus(x)) with a hand-written derivative."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.tanh(F.softplus(x))

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        t = torch.tanh(F.softplus(x))
        return grad_output * (t + x * torch.sigmoid(x) * (1 - t * t))


class SoftmaxFunction(torch.autograd.Function):
    """Softmax over the last dim with the usual y·(g − Σ g·y) backward."""

    @staticmethod
    def forward(ctx, x):
        y = torch.softmax(x, -1)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return y * (g - (g * y).sum(-1, keepdim=True))


class LayerNormFunction(torch.autograd.Function):
    """Layer norm over the last dim, no affine, with the textbook backward."""

    @staticmethod
    def forward(ctx, x):
        mu = x.mean(-1, keepdim=True)
        var = x.var(-1, unbiased=False, keepdim=True)
        rstd = 1 / torch.sqrt(var + 1e-5)
        xhat = (x - mu) * rstd
        ctx.save_for_backward(xhat, rstd)
        return xhat

    @staticmethod
    def backward(ctx, g):
        xhat, rstd = ctx.saved_tensors
        n = xhat.shape[-1]
        return rstd / n * (n * g - g.sum(-1, keepdim=True)
                           - xhat * (g * xhat).sum(-1, keepdim=True))


class LinearFunction(torch.autograd.Function):
    """The PyTorch extending-autograd tutorial's linear layer."""

    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        return x @ w.t() + b

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g @ w, g.t() @ x, g.sum(0)


def linear(x, w, b):
    return LinearFunction.apply(x, w, b)


def tanh_in_float32(x):
    """A smooth forward that ends in float32 for any input (mixed precision)."""
    return torch.tanh(x).float()


def scaled(x, alpha=0.5):
    """A float parameter with a default: kept, not made a random tensor."""
    return torch.sin(x) * alpha


def scaled_annotated(x, alpha: float):
    """A float parameter without a default: only --arg can give it."""
    return torch.sin(x) * alpha


# --------------------------------------------------------- surrogates on a flat forward
class RoundSTE(torch.autograd.Function):
    """Straight-through round (identity backward)."""

    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, g):
        return g


class BinarizeSTE(torch.autograd.Function):
    """BinaryNet's sign with the hardtanh-gated straight-through estimator."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sign(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x.abs() <= 1).to(g.dtype)


class FastSigmoidSpike(torch.autograd.Function):
    """snnTorch-style Heaviside spike with the fast-sigmoid (SuperSpike) surrogate; the forward
    returns float32 whatever its input (`.float()`), as spiking code often does."""

    @staticmethod
    def forward(ctx, mem, slope=25.0):
        ctx.save_for_backward(mem)
        ctx.slope = slope
        return (mem > 0).float()

    @staticmethod
    def backward(ctx, grad_output):
        (mem,) = ctx.saved_tensors
        return grad_output / (ctx.slope * mem.abs() + 1.0) ** 2, None


def spike(mem):
    return FastSigmoidSpike.apply(mem)


def round_detach(x):
    """The detach trick: forward round(x), backward identity."""
    return x + (x.round() - x).detach()


class ClampPassThrough(torch.autograd.Function):
    """A clamp whose backward passes the gradient through everywhere."""

    @staticmethod
    def forward(ctx, x):
        return x.clamp(-1, 1)

    @staticmethod
    def backward(ctx, g):
        return g


def clamp_detach(x):
    """`x + (x.clamp(lo, hi) - x).detach()`: clamp forward, identity backward."""
    return x + (x.clamp(-1, 1) - x).detach()


def hard_gumbel(logits):
    """F.gumbel_softmax(hard=True)'s construction, with fixed noise (τ = 1)."""
    gen = torch.Generator().manual_seed(0)
    noise = -torch.empty(logits.shape, dtype=logits.dtype).exponential_(generator=gen).log()
    y_soft = (logits + noise).softmax(-1)
    index = y_soft.max(-1, keepdim=True)[1]
    y_hard = torch.zeros_like(logits).scatter_(-1, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


# ----------------------------------------- deliberate gradients on a forward that is not flat
class GradientReversal(torch.autograd.Function):
    """DANN's gradient reversal layer: identity forward, −α·g backward."""

    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.neg() * ctx.alpha, None


def grad_reverse(x, alpha=0.5):
    return GradientReversal.apply(x, alpha)


class PACT(torch.autograd.Function):
    """PACT's clipped, 4-bit quantized activation with a learned clipping level α."""

    @staticmethod
    def forward(ctx, x, alpha):
        ctx.save_for_backward(x, alpha)
        y = torch.clamp(x, min=0, max=float(alpha))
        scale = (2 ** 4 - 1) / alpha
        return torch.round(y * scale) / scale

    @staticmethod
    def backward(ctx, dy):
        x, alpha = ctx.saved_tensors
        inside = (x >= 0) & (x <= alpha)
        grad_alpha = torch.sum(dy * (x >= alpha).float()).view(-1)
        return dy * inside.float(), grad_alpha


def pact(x, alpha):
    return PACT.apply(x, alpha)


def lsq(x, s):
    """Learned step size quantization (Esser et al.), 4-bit signed, with its gradient scale."""
    qn, qp = 8, 7
    g = 1.0 / math.sqrt(x.numel() * qp)
    s_scaled = (s - s * g).detach() + s * g
    q = (x / s_scaled).clamp(-qn, qp)
    return ((q.round() - q).detach() + q) * s_scaled


# ------------------------------------------------------------------------ buggy variants
class SwishMissingTerm(MemoryEfficientSwish):
    """Swish whose backward forgot the product rule's second term."""

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * torch.sigmoid(x)


class LinearBatchMean(LinearFunction):
    """A linear layer whose backward divides the parameter gradients by the batch size."""

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        n = x.shape[0]
        return g @ w, g.t() @ x / n, g.sum(0) / n


def linear_batch_mean(x, w, b):
    return LinearBatchMean.apply(x, w, b)


class SignFlip(torch.autograd.Function):
    """exp whose backward has the sign wrong."""

    @staticmethod
    def forward(ctx, x):
        y = torch.exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return -g * y


class MatmulTransposed(torch.autograd.Function):
    """x @ w whose backward returns the weight gradient transposed."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g @ w.t(), (x.t() @ g).t()


class MulSwapped(torch.autograd.Function):
    """a·b whose backward returns the gradients in the wrong order."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g * a, g * b


class DetachedPath(torch.autograd.Function):
    """x·y + y² whose backward returns nothing for y (a detached path)."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y + y * y

    @staticmethod
    def backward(ctx, g):
        _, y = ctx.saved_tensors
        return g * y, torch.zeros_like(y)


class HeadBug(SoftmaxFunction):
    """Row-wise softmax whose backward is wrong on the last row only (one attention head)."""

    @staticmethod
    def backward(ctx, g):
        grad = SoftmaxFunction.backward(ctx, g)
        (y,) = ctx.saved_tensors
        grad[-1] = y[-1] * g[-1]
        return grad


class ExpPlusOne(torch.autograd.Function):
    """exp whose backward adds the gradient of an x term the forward does not have."""

    @staticmethod
    def forward(ctx, x):
        y = torch.exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y + g


class GatedSTEWrongWindow(torch.autograd.Function):
    """A clamp whose backward gates on the wrong window (|x| < 2 instead of |x| < 1)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(-1, 1)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x.abs() < 2).to(g.dtype) * 0.5


# ------------------------------------------------- declared in code, without importing gradscope
class MarkedGradientReversal(GradientReversal):
    """Gradient reversal that says so: the marker gradscope reads (no import needed)."""

    __gradscope_surrogate__ = "gradient reversal for domain-adversarial training"


def marked_reverse(x):
    """The marked Function called inside a function: only inputs behind it are declared."""
    return MarkedGradientReversal.apply(x, 0.5)


def marked_reverse_and_bug(x, y):
    """x goes through the marked reversal; y through a sign-flip bug that stays a bug."""
    return MarkedGradientReversal.apply(x, 0.5) + SignFlip.apply(y)


# ------------------------------------------------- a top-k mask, straight through
class TopKBinarizer(torch.autograd.Function):
    """Movement pruning's mask (emmental's binarizer): 1 for the scores in the top `threshold`
    share, 0 for the rest, and straight through in backward."""

    @staticmethod
    def forward(ctx, inputs, threshold):
        mask = inputs.clone()
        _, idx = inputs.flatten().sort(descending=True)
        j = int(threshold * inputs.numel())
        flat_out = mask.flatten()
        flat_out[idx[j:]] = 0
        flat_out[idx[:j]] = 1
        return flat_out.view_as(inputs)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None


def topk_mask(scores):
    return TopKBinarizer.apply(scores, 0.5)


class TopKBinarizerDoubled(TopKBinarizer):
    """The same mask whose straight-through gradient is doubled."""

    @staticmethod
    def backward(ctx, grad_output):
        return 2 * grad_output, None


def topk_mask_doubled(scores):
    return TopKBinarizerDoubled.apply(scores, 0.5)
