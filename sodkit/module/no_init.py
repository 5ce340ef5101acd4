"""Building a network whose weights all come from a file, without first initialising them.

A network's constructor fills every parameter with random values (``nn.init``'s functions, each
layer's ``reset_parameters``): for the demo's ResNet-18 FPN that took 0.20 s of a 0.22 s build
on one thread, a fixed cost that ``sodkit predict``, ``sodkit test`` and ``sodkit.load`` paid only
to overwrite every value with the checkpoint's at once (``benchmarks/predict_speed.py``).

Inside :func:`skip_parameter_init`, the value-writing in-place tensor operations that
initialisation uses are no-ops when their target is a :class:`~torch.nn.Parameter`; the
parameter keeps the memory it was allocated with. So a network built there is fit only for a
strict ``load_state_dict`` of a complete state dict, which overwrites every parameter (a missing
one is the loader's error). Everything else is built as usual: buffers (BatchNorm's running
statistics, non-persistent tables such as Swin's relative position index) are not parameters and
are filled as always, and so are tensors that are not parameters yet (a value computed before it
is wrapped). The random number generators are left untouched, too.

Not the meta device: the memory a parameter is allocated here is never touched (no page of
it is faulted in), and the loader assigns the file's tensors in its place
(:func:`sodkit.checkpoint_weights.assign_weights`), so a build on the meta device would save
nothing (MINet-R50, 162M parameters: 0.07-0.10 s built here, 0.12-0.16 s on meta) and would
leave the buffers computed at construction (Swin's relative position index) without values.

It is a :class:`~torch.overrides.TorchFunctionMode`, which is thread-local: a network built in
another thread at the same time (a user's training thread) is initialised as usual.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from torch import nn
from torch.overrides import TorchFunctionMode

# torch.nn.init's functions (handled as one call each) and the tensor methods that they and
# timm's own trunc_normal_ fill a tensor with; never requires_grad_ (freezing) or anything that
# changes a parameter's shape or flags
_INIT_OPS = frozenset({
    "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_", "dirac_",
    "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_",
    "sparse_", "fill_", "zero_", "copy_", "erfinv_", "mul_", "add_", "clamp_", "exponential_",
    "log_normal_", "bernoulli_", "random_",
})


class _SkipParameterInit(TorchFunctionMode):
    def __torch_function__(self, func: Any, types: Any, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        target = args[0] if args else kwargs.get("tensor")  # nn.init's functions: by keyword
        if isinstance(target, nn.Parameter) and getattr(func, "__name__", "") in _INIT_OPS:
            return target
        return func(*args, **kwargs)


@contextmanager
def skip_parameter_init() -> Iterator[None]:
    """Parameters built inside keep their allocated (uninitialised) memory: for a network whose
    every parameter is loaded next, strictly, from a checkpoint or model file."""
    with _SkipParameterInit():
        yield
