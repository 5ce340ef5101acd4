"""AllReduceBatchNorm under 2 real gloo processes equals BatchNorm on the concatenated batch."""

from __future__ import annotations

import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from sodkit.module import AllReduceBatchNorm, convert_allreduce_batchnorm, freeze_batchnorm

WORLD = 2


def _data() -> tuple[torch.Tensor, torch.Tensor, nn.BatchNorm2d]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 3, 5, 4, generator=g) * 3 + 1
    w = torch.randn(6, 3, 5, 4, generator=g)  # weights of the loss: sum(y * w) / N
    bn = nn.BatchNorm2d(3, momentum=0.3)
    with torch.no_grad():
        bn.weight.uniform_(0.5, 1.5, generator=g)
        bn.bias.uniform_(-0.5, 0.5, generator=g)
    return x, w, bn


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, port: int, out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD)
    x, w, bn = _data()
    layer, skipped = convert_allreduce_batchnorm(bn)
    assert isinstance(layer, AllReduceBatchNorm) and not skipped
    rows = slice(rank * 3, rank * 3 + 3)
    xr = x[rows].clone().requires_grad_(True)
    for _ in range(2):  # two steps: running statistics accumulate
        xr.grad = None
        layer.weight.grad = layer.bias.grad = None
        y = layer(xr)
        (y * w[rows]).sum().div(x.shape[0]).backward()
    torch.save({"y": y.detach(), "dx": xr.grad, "dw": layer.weight.grad, "db": layer.bias.grad,
                "mean": layer.running_mean, "var": layer.running_var,
                "n": layer.num_batches_tracked}, f"{out}/rank{rank}.pt")
    dist.destroy_process_group()


@pytest.mark.multiprocess
def test_allreduce_batchnorm_equals_full_batch_batchnorm(tmp_path):
    mp.spawn(_worker, args=(_free_port(), str(tmp_path)), nprocs=WORLD, join=True)
    x, w, bn = _data()
    x = x.clone().requires_grad_(True)
    for _ in range(2):
        x.grad = None
        bn.weight.grad = bn.bias.grad = None
        y = bn(x)
        (y * w).sum().div(x.shape[0]).backward()
    parts = [torch.load(tmp_path / f"rank{r}.pt") for r in range(WORLD)]
    tol = {"atol": 1e-6, "rtol": 1e-5}
    torch.testing.assert_close(torch.cat([p["y"] for p in parts]), y.detach(), **tol)
    torch.testing.assert_close(torch.cat([p["dx"] for p in parts]), x.grad, **tol)
    # each rank's parameter gradient is its share of the global one (DDP then averages)
    torch.testing.assert_close(sum(p["dw"] for p in parts), bn.weight.grad, **tol)
    torch.testing.assert_close(sum(p["db"] for p in parts), bn.bias.grad, **tol)
    for p in parts:
        torch.testing.assert_close(p["mean"], bn.running_mean, **tol)
        torch.testing.assert_close(p["var"], bn.running_var, **tol)  # unbiased, global count
        assert int(p["n"]) == int(bn.num_batches_tracked) == 2


def test_single_process_and_eval_mode_are_plain_batchnorm():
    x, _, bn = _data()
    layer = AllReduceBatchNorm(3, momentum=0.3)
    layer.load_state_dict(bn.state_dict())
    torch.testing.assert_close(layer(x), bn(x), rtol=0, atol=0)
    layer.eval()
    bn.eval()
    torch.testing.assert_close(layer(x), bn(x), rtol=0, atol=0)


def test_conversion_keeps_parameters_and_reports_subclasses():
    class Custom(nn.BatchNorm2d):
        pass

    model = nn.Sequential(nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4), nn.Sequential(Custom(4)))
    weight = model[1].weight
    model, skipped = convert_allreduce_batchnorm(model)
    assert isinstance(model[1], AllReduceBatchNorm) and model[1].weight is weight
    assert skipped == ["Custom"]


def test_freeze_batchnorm_puts_every_norm_in_eval_mode():
    model = nn.Sequential(nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4), nn.ReLU()).train()
    assert freeze_batchnorm(model) == 1
    assert model.training and not model[1].training
    before = model[1].running_mean.clone()
    model(torch.randn(2, 3, 4, 4))
    assert torch.equal(model[1].running_mean, before)
