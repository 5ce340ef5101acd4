"""The output side of an inference pipeline (``data.preprocess``): network output -> uint8 mask
(and the probability map it quantises) at the image's own size, the way the pipeline's authors
made their masks; the resize back (:func:`probability_at`, :func:`to_uint8_at`).

:mod:`sodkit.inference.preprocess` holds the input side; :mod:`sodkit.inference.pipelines`
pairs the two by name, and the transform's ``preprocess`` name picks the postprocess
(:func:`~sodkit.inference.pipelines.postprocess_of`), so the evaluator, ``sodkit predict``, the
server and the Python API follow a model's pipeline through the transform alone.

- ``sodkit``: sigmoid probabilities at the input size, resized bilinearly to the image and
  rounded (:func:`to_uint8_at`), exactly as always.
- ``minet`` (MINet ``tools/inference.py``): sigmoid; ``to_pil_image``'s ``x 255`` truncated to
  uint8 at the input size; PIL nearest-neighbour resize to the image size.
- ``f3net`` (F3Net ``src/test.py``): the network's main logits before its own final upsampling
  (``coarse_logits``, stride 4), resized bilinearly (``align_corners=False``) straight to the
  image size, sigmoid, ``x 255``, rounded half to even (``np.round``).

Test-time augmentation averages the passes' probabilities in every pipeline (for ``f3net``,
each pass's logits are resized before their sigmoid).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F


def probability_at(prob: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """One (1, 1, h, w) probability map resized to ``size`` (bilinear), as (H, W) float32: what
    :func:`to_uint8_at` quantises, and what the Python API and the cut-outs read."""
    if tuple(prob.shape[-2:]) != tuple(size):
        prob = F.interpolate(prob, size=size, mode="bilinear", align_corners=False)
    return prob[0, 0]


def to_uint8_at(prob: torch.Tensor, size: tuple[int, int]) -> np.ndarray:
    """Resize one (1, 1, h, w) probability map to ``size`` (bilinear) and quantise like a PNG."""
    return probability_at(prob, size).mul(255.0).round_().clamp_(0, 255).to(torch.uint8).cpu(
        ).numpy()


class Postprocess:
    """sodkit's own: probabilities at the input size, bilinear to the image size, rounded."""

    coarse = False  # scores are the main logits before the network's final upsampling

    def to_mask(self, scores: torch.Tensor, size: tuple[int, int]) -> np.ndarray:
        """One image's scores (1, C, h, w) -> its uint8 mask (H, W)."""
        return to_uint8_at(scores, size)

    def probabilities(self, scores: torch.Tensor) -> torch.Tensor:
        """One image's scores (C, h, w) -> probabilities (1, h, w), for looking at."""
        return scores

    def probability_map(self, scores: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
        """One image's scores (1, C, h, w) -> float32 (H, W) in [0, 1]: what :meth:`to_mask`
        quantises (the Python API's maps and the cut-outs read it)."""
        return probability_at(scores, size)


class MINetPostprocess(Postprocess):
    def to_mask(self, scores: torch.Tensor, size: tuple[int, int]) -> np.ndarray:
        from PIL import Image

        at_input = scores[0, 0].mul(255.0).to(torch.uint8).cpu().numpy()  # .byte(): truncation
        # a writable copy: torch.from_numpy warns on the read-only buffer of np.asarray(PIL)
        return np.array(Image.fromarray(at_input).resize((size[1], size[0]), Image.NEAREST))

    def probability_map(self, scores: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
        # the authors quantise at the input size before resizing: their mask is the map
        return torch.from_numpy(self.to_mask(scores, size)).float().div_(255.0)


class BiRefNetPostprocess(Postprocess):
    def to_mask(self, scores: torch.Tensor, size: tuple[int, int]) -> np.ndarray:
        return self.probability_map(scores, size).mul(255.0).to(torch.uint8).cpu().numpy()

    def probability_map(self, scores: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
        return F.interpolate(scores.float(), size=tuple(size), mode="bilinear",
                             align_corners=True)[0, 0]


class BiRefNetCardPostprocess(MINetPostprocess):
    def to_mask(self, scores: torch.Tensor, size: tuple[int, int]) -> np.ndarray:
        from PIL import Image

        at_input = scores[0, 0].mul(255.0).to(torch.uint8).cpu().numpy()
        return np.array(Image.fromarray(at_input).resize((size[1], size[0]), Image.BICUBIC))


class F3NetPostprocess(Postprocess):
    coarse = True

    def to_mask(self, scores: torch.Tensor, size: tuple[int, int]) -> np.ndarray:
        probs = self.probability_map(scores, size)
        return probs.mul(255.0).round_().clamp_(0, 255).to(torch.uint8).cpu().numpy()

    def probabilities(self, scores: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(scores.float()).mean(dim=0, keepdim=True)

    def probability_map(self, scores: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
        logits = F.interpolate(scores.float(), size=tuple(size), mode="bilinear",
                               align_corners=False)
        return torch.sigmoid(logits).mean(dim=1)[0]
