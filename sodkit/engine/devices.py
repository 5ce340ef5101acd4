"""Which GPU a process uses and which backend its collectives take: pure functions of the
launcher's numbers, so that the choices the GPU path depends on are tested on any machine.

- The device comes from the **local** rank (the rank on this node), never the global rank: on the
  second node of a 2 x 8 job the global ranks are 8-15 but the GPUs are 0-7.
- NCCL refuses two ranks of one communicator on the same GPU ("Duplicate GPU detected", NCCL >=
  2.5), so a node that shows fewer GPUs than it runs processes is an error said before any
  collective; ``runtime.dist_backend=gloo`` runs such a layout (gloo takes CUDA tensors too), for
  a functional check of several processes on one GPU.
- Object collectives (``gather_object``, ``broadcast_object_list``) pickle into tensors of the
  group's device: on NCCL every gathered metric record or PNG would pass through GPU memory (rank
  0 allocating world x the largest payload there) and each call would synchronise the device.
  They, and the once-per-step stop/save decision, use a gloo group of CPU tensors instead. On
  gloo runs too that is a group of its own (``Runtime.close`` frees it at the end, so that no
  late collective thread outlives the interpreter).
"""

from __future__ import annotations

from ..errors import ConfigError

BACKENDS = ("auto", "nccl", "gloo")


def cuda_index(local_rank: int, visible: int) -> int:
    """The CUDA device index of a process with ``local_rank`` on a node showing ``visible`` GPUs.

    One visible GPU is the process's own when the scheduler binds one GPU per task (``srun
    --gpus-per-task=1`` sets ``CUDA_VISIBLE_DEVICES`` per task), so it is index 0 whatever the
    local rank; with several, local rank r takes GPU r.
    """
    if visible < 1:
        raise ConfigError("runtime.device: CUDA asked for, but no GPU is visible")
    if visible == 1:
        return 0
    if not 0 <= local_rank < visible:
        raise ConfigError(
            f"local rank {local_rank} has no GPU of its own: this node shows {visible} GPUs "
            f"(CUDA_VISIBLE_DEVICES) for more processes; start at most {visible} processes per "
            f"node (torchrun --nproc_per_node, srun --ntasks-per-node)")
    return local_rank


def dist_backend(choice: str, device_type: str) -> str:
    """``runtime.dist_backend``: auto is NCCL on CUDA and gloo on the CPU; NCCL needs CUDA."""
    if choice not in BACKENDS:
        raise ConfigError(f"runtime.dist_backend: {choice!r} is not one of {list(BACKENDS)}")
    if choice == "auto":
        return "nccl" if device_type == "cuda" else "gloo"
    if choice == "nccl" and device_type != "cuda":
        raise ConfigError("runtime.dist_backend: nccl needs a CUDA device; use gloo or auto")
    return choice
