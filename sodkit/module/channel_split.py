"""Checkpointing a convolution-led run of layers as several segments, one per output-channel group.

Why: a ResNet stem (conv1 -> bn1 -> ReLU -> max-pool) makes the largest maps of the network
(stride 2). Checkpointed as one segment, its backward runs last, when every parameter gradient
already exists, and holds four such maps at once: the recomputed conv output (BatchNorm's input)
and ReLU output, the max-pool's input gradient and the ReLU's input gradient, then BatchNorm's
input gradient. On the demo (batch 16, 160 px, 64 channels: 25 MB per map) that was the step's
peak: 43 MB of gradients + 4 x 25 MB (``benchmarks/RESULTS.md``, ``bench_memory``).

Every layer after the convolution acts on each channel alone (BatchNorm's statistics are per
channel, activations are elementwise, pooling is per channel), and each output channel of the
convolution reads all input channels but only its own filter. So the run computes the same
values channel group by channel group, each group a checkpoint segment whose backward holds
maps of ``1 / groups`` of the channels. The groups' outputs are concatenated, which costs one
copy of the (small, pooled) output. The outputs, BatchNorm statistics and the gradients of
everything after the convolution are the plain run's bit for bit; the convolution's weight
gradient too when the groups are a multiple of the kernel's channel block wide (16 channels:
the ResNet stems' 64 channels in four groups, tested), otherwise it differs by float rounding
(about 1e-6 relative, measured). The run's input must need no gradient (the image): its
gradient would be summed group by group, so such runs are not split.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .grad_checkpoint import checkpoint_segment

GROUPS = 4  # the stem's working set shrinks to about one of its maps (measured: RESULTS.md)
BLOCK = 16  # group widths are rounded up to this many channels (a SIMD block of the kernels)

# Layers that act on each channel alone, called unchanged on a group of channels.
_PER_CHANNEL = (nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.SiLU, nn.GELU, nn.Hardswish, nn.Sigmoid,
                nn.Tanh, nn.ELU, nn.Identity, nn.MaxPool2d, nn.AvgPool2d)


def splittable(layers: list[nn.Module]) -> bool:
    """Whether ``layers`` are a plain convolution followed by per-channel layers only.

    Exact types: a subclass may change the computation (timm's ``Conv2dSame`` pads in its
    forward, ``SyncBatchNorm`` / ``AllReduceBatchNorm`` reduce statistics over ranks), so only
    the classes whose forward is reproduced here per group qualify. Checked at every call,
    because ``runtime.sync_bn`` converts BatchNorms after the plan was made.
    """
    if len(layers) < 2:
        return False
    conv = layers[0]
    if type(conv) is not nn.Conv2d or conv.groups != 1 or conv.padding_mode != "zeros":
        return False
    return all(type(m) is nn.BatchNorm2d or type(m) in _PER_CHANNEL for m in layers[1:])


def _batch_norm(bn: nn.BatchNorm2d, x: Tensor, lo: int, hi: int) -> Tensor:
    """``bn`` on channels ``lo:hi``, as ``nn.BatchNorm2d.forward`` computes it, except that
    ``num_batches_tracked`` was counted once by :func:`run_split`, not once per group. During
    checkpoint's recomputation ``frozen_batchnorm_stats`` has set ``bn.momentum`` to 0, so the
    running statistics stay as the forward left them."""
    track = bn.track_running_stats and bn.running_mean is not None
    factor = 0.0
    if bn.training and track:
        factor = bn.momentum if bn.momentum is not None else 1.0 / float(bn.num_batches_tracked)
    use_batch_stats = bn.training or not track
    running = (bn.running_mean[lo:hi], bn.running_var[lo:hi]) if track else (None, None)
    weight = bn.weight[lo:hi] if bn.weight is not None else None
    bias = bn.bias[lo:hi] if bn.bias is not None else None
    return F.batch_norm(x, *running, weight, bias, use_batch_stats, factor, bn.eps)


def _group(layers: nn.ModuleList, x: Tensor, lo: int, hi: int) -> Tensor:
    """The run's output channels ``lo:hi``."""
    conv = layers[0]
    bias = conv.bias[lo:hi] if conv.bias is not None else None
    x = F.conv2d(x, conv.weight[lo:hi], bias, conv.stride, conv.padding, conv.dilation)
    for layer in list(layers)[1:]:
        x = _batch_norm(layer, x, lo, hi) if type(layer) is nn.BatchNorm2d else layer(x)
    return x


def group_width(channels: int, groups: int = GROUPS) -> int:
    """Channels per group: ``channels / groups`` rounded up to a multiple of :data:`BLOCK`."""
    width = -(-channels // max(groups, 1))
    return min(-(-width // BLOCK) * BLOCK, channels)


def run_split(layers: nn.ModuleList, x: Tensor, width: int | None = None) -> Tensor | None:
    """The run's output computed as checkpoint segments of ``width`` output channels each
    (default :func:`group_width`), or None when the split does not apply (see
    :func:`splittable`; no autograd; the input needs a gradient; one group) and the caller should
    run the layers as one segment."""
    members = list(layers)
    if not torch.is_grad_enabled() or x.requires_grad or not splittable(members):
        return None
    channels = members[0].out_channels
    width = width or group_width(channels)
    if width >= channels:
        return None
    for bn in members[1:]:  # what nn.BatchNorm2d.forward does first, once for all groups
        if type(bn) is nn.BatchNorm2d and bn.training and bn.track_running_stats \
                and bn.num_batches_tracked is not None:
            bn.num_batches_tracked.add_(1)
    parts = [checkpoint_segment(_group, layers, x, lo, min(lo + width, channels), owner=layers)
             for lo in range(0, channels, width)]
    return torch.cat(parts, dim=1)
