"""``data.preprocess``: the authors' inference pipelines, and sodkit's own left as it was.

Each author's side is compared with the library calls of that author's code (MINet's
``InferImageSet`` transform and ``to_pil_image`` / PIL resize; F3Net's ``Normalize`` /
``Resize`` and ``np.round``), re-typed here; ``benchmarks/import_parity.py`` runs the original
scripts themselves.
"""

from __future__ import annotations

from dataclasses import replace

import cv2
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image
from torchvision import transforms as T

from sodkit.commands.test import follow_preprocess
from sodkit.config import Config, load_config
from sodkit.config.schema import DataCfg
from sodkit.errors import ConfigError
from sodkit.inference import preprocess as transforms
from sodkit.inference.pipelines import build_test_transform, postprocess_of

F3_MEAN = np.array([[[124.55, 118.90, 102.94]]])  # F3Net src/dataset.py Config
F3_STD = np.array([[[56.77, 55.97, 57.50]]])


@pytest.fixture
def image() -> np.ndarray:
    rng = np.random.default_rng(0)
    return cv2.resize(rng.integers(0, 256, (7, 9, 3), dtype=np.uint8), (251, 173),
                      interpolation=cv2.INTER_CUBIC)


def test_unset_is_sodkit_exactly_as_before(image):
    cfg = DataCfg()
    assert cfg.preprocess is None
    transform = build_test_transform(cfg, 64)
    assert type(transform) is transforms.TestTransform
    assert torch.equal(transform(image), build_test_transform(replace(cfg, preprocess="sodkit"),
                                                              64)(image))
    assert type(postprocess_of(transform)).__name__ == "Postprocess"


def test_an_unknown_pipeline_is_a_config_error():
    with pytest.raises(ConfigError, match=r"data.preprocess: unknown .*'minnet'.*minet, f3net"):
        build_test_transform(DataCfg(preprocess="minnet"))


def test_minet_input_is_its_inference_transform(image):
    theirs = T.Compose([T.Resize((320, 320), interpolation=Image.BILINEAR), T.ToTensor(),
                        T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    ours = build_test_transform(DataCfg(preprocess="minet"), 320)
    assert torch.equal(ours(image), theirs(Image.fromarray(image)))


def test_f3net_input_is_its_dataset_in_float64(image):
    cfg = load_config("configs/duts_f3net_r50.yaml").data
    ours = build_test_transform(replace(cfg, preprocess="f3net"))(image)
    normalised = (image.astype(np.float32) - F3_MEAN) / F3_STD
    theirs = torch.from_numpy(cv2.resize(normalised, (352, 352),
                                         interpolation=cv2.INTER_LINEAR)).permute(2, 0, 1)
    assert ours.dtype == torch.float32 and ours.shape == (3, 352, 352)
    assert (ours.double() - theirs).abs().max() < 1e-5  # the recipe's mean has 7 digits


def test_minet_mask_truncates_then_resizes_nearest():
    post = postprocess_of(build_test_transform(DataCfg(preprocess="minet"), 4))
    probs = torch.tensor([[0.999, 0.5], [0.0039, 1.0]]).reshape(1, 1, 2, 2)
    mask = post.to_mask(probs, (3, 5))
    theirs = np.asarray(T.functional.to_pil_image(probs[0]).resize((5, 3), Image.NEAREST))
    assert np.array_equal(mask, theirs)
    assert mask[0, 0] == 254 and mask[2, 0] == 0  # truncated, not rounded


def test_f3net_mask_resizes_logits_straight_to_the_image_then_rounds():
    post = postprocess_of(build_test_transform(DataCfg(preprocess="f3net"), 8))
    logits = torch.randn(1, 1, 8, 8, generator=torch.Generator().manual_seed(0)) * 3
    mask = post.to_mask(logits, (21, 13))
    up = F.interpolate(logits, size=(21, 13), mode="bilinear", align_corners=False)
    theirs = np.round((torch.sigmoid(up[0, 0]) * 255).numpy())
    assert np.array_equal(mask, theirs.astype(np.uint8))


def test_sodkit_test_follows_the_checkpoints_pipeline_unless_the_recipe_sets_one():
    imported = {"config": {"data": {"preprocess": "minet"}}}
    assert follow_preprocess(Config(), imported).data.preprocess == "minet"
    assert follow_preprocess(Config(), {"config": {"data": {}}}).data.preprocess is None
    chosen = Config(data=DataCfg(preprocess="sodkit"))
    assert follow_preprocess(chosen, imported).data.preprocess == "sodkit"
