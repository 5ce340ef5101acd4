"""What the runtime's graph computes: a network's scores, as the pipeline's output side takes
them (:func:`sodkit.inference.forward.predict_scores`): its logits, or F3Net's coarse logits
(resized by the output side itself). No sigmoid: the forward applies it after test-time
augmentation's passes, as it does for PyTorch's scores."""

from __future__ import annotations

from torch import Tensor, nn


class ScoresModel(nn.Module):
    """``image -> network(image)["logits"]`` (``coarse``: its ``coarse_logits`` when it has
    them)."""

    def __init__(self, network: nn.Module, coarse: bool = False) -> None:
        super().__init__()
        self.network = network
        self.coarse = coarse

    def forward(self, image: Tensor) -> Tensor:
        out = self.network(image)
        if self.coarse:
            return out.get("coarse_logits", out["logits"])
        return out["logits"]
