"""BatchNorm whose batch statistics span every process: the CPU (gloo) stand-in for SyncBatchNorm.

PyTorch's ``nn.SyncBatchNorm`` has no CPU kernel, so a CPU-only job could not use the config that
a GPU job uses. :class:`AllReduceBatchNorm` computes the moments of the *global* batch with two
differentiable all-reduces (``torch.distributed.nn.functional.all_reduce``: the sum and count, then
the centred sum of squares), so its output, its running statistics (unbiased variance with the
global count) and, after DDP averages the gradients, its gradients equal those of plain BatchNorm
on the concatenated batch. It knows nothing about ranks beyond the collective: outside a process
group of two or more, or in eval mode, it is plain BatchNorm.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.distributed.nn.functional import all_reduce
from torch.nn.modules.batchnorm import _BatchNorm

_PLAIN = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


def _group_active() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


class AllReduceBatchNorm(_BatchNorm):
    """BatchNorm over (N, C, ...) inputs with statistics all-reduced over the default group."""

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (N, C, ...), got {input.dim()}D")

    def forward(self, input: Tensor) -> Tensor:
        if not (self.training and _group_active()):
            return super().forward(input)
        self._check_input_dim(input)
        # moments in float32 whatever the autocast dtype (float64 kept: runtime.precision fp64)
        x = input if input.dtype == torch.float64 else input.float()
        dims = [0, *range(2, x.dim())]
        shape = [1, x.shape[1]] + [1] * (x.dim() - 2)
        count = x.new_tensor([x.numel() / x.shape[1]])
        packed = all_reduce(torch.cat([x.sum(dims), count]))
        total = packed[-1].detach()
        mean = packed[:-1] / total
        centred = x - mean.view(shape)
        var = all_reduce(centred.pow(2).sum(dims)) / total  # two passes: no cancellation
        out = centred * torch.rsqrt(var + self.eps).view(shape)
        if self.affine:
            out = out * self.weight.view(shape) + self.bias.view(shape)
        if self.track_running_stats:
            self._update_running_stats(mean.detach(), var.detach(), total)
        return out.to(input.dtype)

    @torch.no_grad()
    def _update_running_stats(self, mean: Tensor, var: Tensor, total: Tensor) -> None:
        """As ``F.batch_norm``: exponential (or cumulative) average, unbiased variance."""
        self.num_batches_tracked.add_(1)
        momentum = self.momentum
        if momentum is None:
            momentum = 1.0 / float(self.num_batches_tracked)
        unbiased = var * (total / (total - 1).clamp(min=1))
        self.running_mean.mul_(1 - momentum).add_(mean.to(self.running_mean.dtype), alpha=momentum)
        self.running_var.mul_(1 - momentum).add_(unbiased.to(self.running_var.dtype),
                                                 alpha=momentum)


def convert_allreduce_batchnorm(module: nn.Module) -> tuple[nn.Module, list[str]]:
    """Replace every plain ``nn.BatchNorm{1,2,3}d`` by :class:`AllReduceBatchNorm`, in place.

    Parameters and buffers are shared with (not copied from) the original layers, as
    ``nn.SyncBatchNorm.convert_sync_batchnorm`` does. Returns the module and the class names of
    BatchNorm subclasses it could not convert (their forward differs; the caller warns).
    """
    skipped: list[str] = []
    if type(module) in _PLAIN:
        new = AllReduceBatchNorm(module.num_features, module.eps, module.momentum,
                                 module.affine, module.track_running_stats)
        if module.affine:
            new.weight, new.bias = module.weight, module.bias
        if module.track_running_stats:
            new.running_mean, new.running_var = module.running_mean, module.running_var
            new.num_batches_tracked = module.num_batches_tracked
        new.train(module.training)
        return new, skipped
    if isinstance(module, _BatchNorm) and not isinstance(module, AllReduceBatchNorm):
        skipped.append(type(module).__name__)
    for name, child in module.named_children():
        converted, more = convert_allreduce_batchnorm(child)
        skipped.extend(more)
        if converted is not child:
            module.add_module(name, converted)
    return module, skipped


def freeze_batchnorm(module: nn.Module) -> int:
    """Put every BatchNorm layer in eval mode (running statistics used, never updated).

    Call after ``module.train()``. With frozen BatchNorm each sample's loss no longer depends on
    the rest of its batch, which is what makes gradient accumulation exactly equal to a bigger
    batch. The affine scale and shift still train. Returns the number of layers frozen.
    """
    layers = [m for m in module.modules() if isinstance(m, _BatchNorm)]
    for layer in layers:
        layer.eval()
    return len(layers)
