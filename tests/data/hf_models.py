"""Models from a real library nobody here wrote: Hugging Face `transformers` GPT-2 and BERT
built from small configs with random weights (no download). Dropout is on in both (a model
built from a config starts in train mode); GPT-2 ties its output layer to its token embedding
and returns a model-output object with `loss`. `gpt2_off` swaps one block's activation for a
custom Function whose backward is 1 % off."""

import torch
from torch import nn
from transformers import BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel
from transformers.utils import logging

logging.set_verbosity_error()  # (the small vocabulary makes it warn about GPT-2's token ids)


class OffGELUFunction(torch.autograd.Function):
    """tanh-GELU whose backward is 1 % too large."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return nn.functional.gelu(x, approximate="tanh")

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            xd = x.detach().requires_grad_(True)
            (d,) = torch.autograd.grad(nn.functional.gelu(xd, approximate="tanh").sum(), xd)
        return grad * d * 1.01


class OffGELU(nn.Module):
    def forward(self, x):
        return OffGELUFunction.apply(x)


def _gpt2() -> GPT2LMHeadModel:
    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=64,
                                      n_positions=16, activation_function="gelu_new"))


gpt2 = _gpt2()
gpt2_off = _gpt2()
gpt2_off.transformer.h[1].mlp.act = OffGELU()

torch.manual_seed(0)
bert = BertForMaskedLM(BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                                  intermediate_size=64, vocab_size=64,
                                  max_position_embeddings=16))
