"""``data.preprocess: birefnet`` / ``birefnet-card``: BiRefNet's two inference pipelines.

``birefnet`` is the repository's own (``inference.py``, ``dataset.py``, ``utils.py``): cv2
bilinear resize of the uint8 image, ``ToTensor`` + ImageNet ``Normalize``, sigmoid, bilinear
upsampling with ``align_corners=True`` to the image size, ``ToPILImage`` (x 255 truncated).
``birefnet-card`` is the Hugging Face model card's: torchvision ``Resize`` of the PIL image,
the same normalisation, ``ToPILImage`` at the input size, PIL's resize back (bicubic). The
library calls of the original are re-typed here; ``benchmarks/import_parity.py --birefnet``
runs the original's inference itself.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image
from torchvision import transforms as T

from sodkit.config.schema import DataCfg
from sodkit.inference.pipelines import build_test_transform, postprocess_of

NORMALISE = T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])


@pytest.fixture
def image() -> np.ndarray:
    rng = np.random.default_rng(3)
    return cv2.resize(rng.integers(0, 256, (6, 8, 3), dtype=np.uint8), (301, 157),
                      interpolation=cv2.INTER_CUBIC)


def test_birefnet_input_is_cv2_resize_of_the_uint8_image(image):
    ours = build_test_transform(DataCfg(preprocess="birefnet"), 64)(image)
    theirs = NORMALISE(T.ToTensor()(cv2.resize(image, (64, 64), interpolation=cv2.INTER_LINEAR)))
    assert ours.shape == (3, 64, 64) and torch.equal(ours, theirs)


def test_birefnet_card_input_is_torchvision_resize_of_the_pil_image(image):
    ours = build_test_transform(DataCfg(preprocess="birefnet-card"), 64)(image)
    theirs = T.Compose([T.Resize((64, 64)), T.ToTensor(), NORMALISE])(Image.fromarray(image))
    assert torch.equal(ours, theirs)
    cv = build_test_transform(DataCfg(preprocess="birefnet"), 64)(image)
    assert not torch.equal(ours, cv)  # two pipelines, not one under two names


@pytest.fixture
def probs() -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return torch.rand(1, 1, 8, 8, generator=gen)


def test_birefnet_mask_upsamples_aligned_then_truncates(probs):
    post = postprocess_of(build_test_transform(DataCfg(preprocess="birefnet"), 8))
    mask = post.to_mask(probs, (13, 21))
    up = F.interpolate(probs, size=(13, 21), mode="bilinear", align_corners=True)
    theirs = np.asarray(T.ToPILImage()(up.squeeze(0)))
    assert mask.dtype == np.uint8 and np.array_equal(mask, theirs)
    rounded = up[0, 0].mul(255).round().to(torch.uint8).numpy()
    assert not np.array_equal(mask, rounded)  # truncated, not rounded
    assert torch.equal(post.probability_map(probs, (13, 21)), up[0, 0])


def test_birefnet_card_mask_truncates_at_the_input_then_bicubic(probs):
    post = postprocess_of(build_test_transform(DataCfg(preprocess="birefnet-card"), 8))
    mask = post.to_mask(probs, (13, 21))
    theirs = np.asarray(T.ToPILImage()(probs[0]).resize((21, 13), Image.BICUBIC))
    assert np.array_equal(mask, theirs)
    aligned = postprocess_of(build_test_transform(DataCfg(preprocess="birefnet"), 8))
    assert not np.array_equal(mask, aligned.to_mask(probs, (13, 21)))
