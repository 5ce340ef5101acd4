"""BiRefNet's deformable convolution in ONNX: its decomposition equals torchvision's operator,
both exportable forms run in onnxruntime with parity at several sizes of one dynamic graph,
and the PyTorch path is torchvision's again after an export."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torchvision.ops import deform_conv2d

from sodkit.engine.export import (
    SaliencyModel,
    check_parity,
    default_opset,
    deform_conv_runs,
    export_onnx,
)
from sodkit.errors import UserError
from sodkit.module.aspp import ASPPDeformable, DeformConv2d
from sodkit.module.deform_export import deform_conv2d_decomposed, deform_export_form

CASES = [(1, (5, 7)), (3, (9, 6)), (7, (12, 10)), (3, (1, 1)), (7, (2, 3))]


def _inputs(kernel: int, size: tuple[int, int], dtype: torch.dtype, spread: float = 3.0):
    """Random maps, offsets of a few pixels (many samples land between pixels, near the
    border and outside the map) and masks in [0, 2], as ``2 * sigmoid`` gives them."""
    g = torch.Generator().manual_seed(kernel * 100 + size[0])
    taps = kernel * kernel
    x = torch.randn(2, 4, *size, generator=g, dtype=dtype)
    offset = torch.randn(2, 2 * taps, *size, generator=g, dtype=dtype) * spread
    mask = 2 * torch.rand(2, taps, *size, generator=g, dtype=dtype)
    weight = torch.randn(5, 4, kernel, kernel, generator=g, dtype=dtype)
    return x, offset, weight, mask


@pytest.mark.parametrize(("kernel", "size"), CASES)
def test_the_decomposition_equals_torchvision_in_float64(kernel, size) -> None:
    x, offset, weight, mask = _inputs(kernel, size, torch.float64)
    expected = deform_conv2d(x, offset, weight, padding=kernel // 2, mask=mask)
    got = deform_conv2d_decomposed(x, offset, weight, mask, kernel // 2)
    assert got.shape == expected.shape
    assert torch.allclose(got, expected, rtol=0, atol=1e-12), (got - expected).abs().max()


@pytest.mark.parametrize(("kernel", "size"), CASES)
def test_the_decomposition_equals_torchvision_at_float32_round_off(kernel, size) -> None:
    x, offset, weight, mask = _inputs(kernel, size, torch.float32)
    expected = deform_conv2d(x, offset, weight, padding=kernel // 2, mask=mask)
    got = deform_conv2d_decomposed(x, offset, weight, mask, kernel // 2)
    # a sum of 4 * kernel^2 products of values of order 1-10: a few float32 ulps of its terms
    bound = 8 * np.finfo(np.float32).eps * (weight.abs().sum() * x.abs().max() * 2).item()
    assert (got - expected).abs().max().item() <= bound


def test_samples_outside_the_map_count_as_zero() -> None:
    x, offset, weight, mask = _inputs(3, (6, 6), torch.float64)
    far = torch.full_like(offset, 7.0)  # every tap at least a pixel past the bottom right
    assert deform_conv2d(x, far, weight, padding=1, mask=mask).abs().max() == 0
    assert deform_conv2d_decomposed(x, far, weight, mask, 1).abs().max() == 0
    edge = torch.full_like(offset, -1.5)  # partly outside: only in-map corners contribute
    assert torch.allclose(deform_conv2d_decomposed(x, edge, weight, mask, 1),
                          deform_conv2d(x, edge, weight, padding=1, mask=mask), atol=1e-12)


def _aspp() -> ASPPDeformable:
    """An ASPPDeformable whose offsets move samples off the grid and out of the map (a fresh
    one samples the regular grid: a plain convolution)."""
    torch.manual_seed(0)
    module = ASPPDeformable(8, 8).eval()
    for m in module.modules():
        if isinstance(m, DeformConv2d):
            nn.init.normal_(m.offset.weight, std=0.5)
            nn.init.normal_(m.modulator.weight, std=0.5)
    return module


class _Sharp(nn.Module):
    """A network around ``module`` whose logits are large enough that the probabilities
    spread over (0, 1): the parity check on them then sees every difference."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.module = module
        self.head = nn.Conv2d(8, 1, 1)
        nn.init.normal_(self.head.weight, std=20.0)

    def forward(self, image):
        return {"logits": self.head(self.module(self.stem(image)))}


NODE_RUNS = pytest.mark.skipif(not deform_conv_runs(), reason="this onnxruntime has no "
                               "DeformConv kernel (its releases before 2026)")


@pytest.mark.parametrize(("form", "opset"), [("decomposed", 17),
                                             pytest.param("DeformConv", 19, marks=NODE_RUNS)])
def test_each_form_exports_a_dynamic_graph_with_parity(form, opset, tmp_path) -> None:
    model = SaliencyModel(_Sharp(_aspp())).eval()
    path = tmp_path / f"{form}.onnx"
    export_onnx(model, path, (16, 20), opset, dynamic=True, deform=form)
    import onnx

    ops = {node.op_type for node in onnx.load(str(path)).graph.node}
    assert ("DeformConv" in ops) == (form == "DeformConv") and ("GridSample" in ops) == (
        form == "decomposed")
    results = check_parity(model, path, [(16, 20), (9, 33), (31, 7)])
    assert max(diff for _, diff in results) <= 1e-5, results
    with torch.no_grad():
        spread = model(torch.randn(2, 3, 16, 20)).std().item()
    assert spread > 0.1  # probabilities far from constant: the check compares real values
    assert all(m.export_form is None for m in model.modules() if isinstance(m, DeformConv2d))


def test_the_pytorch_path_is_torchvisions_outside_an_export() -> None:
    module = _aspp()
    conv = module.branches[3][0]
    x = torch.randn(1, 8, 11, 13, requires_grad=True)
    with deform_export_form(module, "decomposed") as count:
        assert count == 4 and conv.export_form is deform_conv2d_decomposed
    assert conv.export_form is None
    offset, mask = conv.offset(x), 2 * torch.sigmoid(conv.modulator(x))
    expected = deform_conv2d(x, offset, conv.weight, padding=conv.padding, mask=mask)
    assert torch.equal(conv(x), expected)


def test_an_opset_without_grid_sample_is_refused_in_one_line(tmp_path) -> None:
    with pytest.raises(UserError, match=r"deformable convolutions need --opset 16 or newer"):
        export_onnx(SaliencyModel(_Sharp(_aspp())), tmp_path / "m.onnx", (16, 16), 15, False)
    assert not (tmp_path / "m.onnx").exists()


def test_the_default_opset_writes_the_node_where_onnxruntime_runs_it() -> None:
    assert default_opset(SaliencyModel(_Sharp(_aspp()))) == (19 if deform_conv_runs() else 17)
    assert default_opset(SaliencyModel(_Sharp(nn.Identity()))) == 17  # no deformable conv
