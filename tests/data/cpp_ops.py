"""A C++ extension's dispatcher ops with autograd kernels written in C++ (a
`torch::autograd::Function`, as torchvision's roi_align has): `gradscope_cpp::scaled_sin`,
sin(x)·a, and `scaled_sin_bug`, whose backward is 1.5 times too large. No Python Function
stands for them, so only the dispatcher sees their calls. Built with torch's `load_inline`
on first import (about 30 s; gcc, ninja and Python's headers needed), into a folder of the
temporary directory named by the source's hash, so later imports load it."""

import hashlib
import tempfile
from pathlib import Path

import torch
from torch.utils.cpp_extension import load_inline

SRC = r'''
#include <torch/extension.h>
#include <torch/library.h>
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

static torch::Tensor scaled_sin_cpu(const torch::Tensor& x, double a) { return at::sin(x) * a; }

template <int BUG>
struct ScaledSin : public torch::autograd::Function<ScaledSin<BUG>> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, double a) {
    ctx->save_for_backward({x});
    ctx->saved_data["a"] = a;
    at::AutoDispatchBelowADInplaceOrView guard;
    static auto op = c10::Dispatcher::singleton().findSchemaOrThrow(
        BUG ? "gradscope_cpp::scaled_sin_bug" : "gradscope_cpp::scaled_sin", "");
    return op.typed<torch::Tensor(const torch::Tensor&, double)>().call(x, a);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    auto x = ctx->get_saved_variables()[0];
    double a = ctx->saved_data["a"].toDouble();
    auto d = g[0] * at::cos(x) * a;
    return {BUG ? d * 1.5 : d, torch::Tensor()};
  }
};

static torch::Tensor right(const torch::Tensor& x, double a) { return ScaledSin<0>::apply(x, a); }
static torch::Tensor wrong(const torch::Tensor& x, double a) { return ScaledSin<1>::apply(x, a); }

TORCH_LIBRARY(gradscope_cpp, m) {
  m.def("scaled_sin(Tensor x, float a) -> Tensor");
  m.def("scaled_sin_bug(Tensor x, float a) -> Tensor");
}
TORCH_LIBRARY_IMPL(gradscope_cpp, CPU, m) {
  m.impl("scaled_sin", scaled_sin_cpu);
  m.impl("scaled_sin_bug", scaled_sin_cpu);
}
TORCH_LIBRARY_IMPL(gradscope_cpp, Autograd, m) {
  m.impl("scaled_sin", right);
  m.impl("scaled_sin_bug", wrong);
}
'''

_NAME = "gradscope_cpp_" + hashlib.sha256(SRC.encode()).hexdigest()[:12]
_BUILD = Path(tempfile.gettempdir()) / _NAME
_BUILD.mkdir(exist_ok=True)
if not hasattr(torch.ops.gradscope_cpp, "scaled_sin"):
    load_inline(_NAME, cpp_sources=[SRC], is_python_module=False, build_directory=str(_BUILD))


def uses_right(x):
    return torch.ops.gradscope_cpp.scaled_sin(x, 2.0) * x


def uses_wrong(x):
    return torch.ops.gradscope_cpp.scaled_sin_bug(x, 2.0) * x
