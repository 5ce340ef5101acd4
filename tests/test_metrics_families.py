"""The optional metric families equal their references (PySODMetrics 1.6.2, BiRefNet's
evaluation) on realistic pairs and edge cases, and merge exactly like the standard set."""

from __future__ import annotations

import dataclasses
import re

import cv2
import numpy as np
import pytest

from sodkit.metrics import SODMetrics
from sodkit.metrics.families import FAMILIES, MissingPackage, resolve
from tests.families_fixtures import (
    H,
    W,
    birefnet_biou,
    birefnet_mba,
    birefnet_mse,
    camouflaged_image,
    edge_pairs,
    reference_ccm,
    reference_cm,
    reference_hce,
    reference_msiou,
    reference_plain_f,
    reference_size_invariance,
)

PAIRS = edge_pairs()


def ours(families: str, pairs=None) -> dict:
    metrics = SODMetrics(families=families)
    for _, pred, gt in PAIRS if pairs is None else pairs:
        metrics.update(pred, gt)
    return metrics.compute()


def test_families_are_off_by_default_and_selected_by_name():
    assert SODMetrics().families == ()
    metrics = SODMetrics()
    metrics.update(PAIRS[0][1], PAIRS[0][2])
    assert "MSE" not in metrics.compute()
    assert resolve("all") == tuple(name for name in FAMILIES if name not in ("CCM", "Flicker"))
    assert resolve("ALL,ccm") == tuple(n for n in FAMILIES if n != "Flicker")  # CCM: named
    assert resolve("ALL,ccm,flicker") == tuple(FAMILIES)  # Flicker: frames, named too
    assert resolve("mse") == ("MSE",)
    with pytest.raises(ValueError, match="unknown metric family nope; choose from MSE"):
        resolve("MSE,nope")


def test_mse_equals_birefnet():
    expected = birefnet_mse((p, g) for _, p, g in PAIRS)
    assert ours("MSE")["MSE"] == expected  # the same float64 operations: the same bits
    for name, pred, gt in PAIRS:
        assert ours("MSE", [(name, pred, gt)])["MSE"] == birefnet_mse([(pred, gt)]), name


def test_merged_halves_equal_the_whole_with_every_family():
    pairs = PAIRS[5:]
    whole = ours("all", pairs)
    first, second = SODMetrics(families="all"), SODMetrics(families="all")
    for i, (_, pred, gt) in enumerate(pairs):
        (first if i % 2 else second).update(pred, gt, index=i)
    merged = SODMetrics.from_states([first.state_dict(), second.state_dict()])
    result = merged.compute()
    assert list(result) == list(whole)
    for key in whole:
        np.testing.assert_array_equal(result[key], whole[key], err_msg=key)


def test_states_of_different_selections_do_not_merge():
    a, b = SODMetrics(families="MSE"), SODMetrics()
    a.update(PAIRS[0][1], PAIRS[0][2], index=0)
    b.update(PAIRS[1][1], PAIRS[1][2], index=1)
    with pytest.raises(ValueError, match="different metric families"):
        SODMetrics.from_states([a.state_dict(), b.state_dict()])


def test_hce_equals_pysodmetrics_exactly():
    expected, per_image = reference_hce((p, g) for _, p, g in PAIRS)
    assert ours("HCE")["HCE"] == expected
    for (name, pred, gt), value in zip(PAIRS, per_image, strict=True):
        assert ours("HCE", [(name, pred, gt)])["HCE"] == value, name


def assert_close(result: dict, expected: dict, tol: float, name: str = "") -> None:
    for key, value in expected.items():
        if np.isnan(value):
            assert np.isnan(result[key]), (name, key)
        else:
            assert abs(result[key] - value) <= tol, (name, key, result[key], value)


FULL = {"full_gt", "full_gt_full_pred"}  # the size-invariant reference stops on these


def test_size_invariant_metrics_equal_pysodmetrics():
    pairs = [pair for pair in PAIRS if pair[0] not in FULL]
    expected = reference_size_invariance((p, g) for _, p, g in pairs)
    assert_close(ours("SI", pairs), expected, 1e-12)
    for name, pred, gt in pairs:
        assert_close(ours("SI", [(name, pred, gt)]), reference_size_invariance([(pred, gt)]),
                     1e-12, name)


def test_size_invariant_metrics_score_a_gt_without_background_on_its_target():
    """The reference asserts on a full GT and gives NaN (0 * 0 / 0) where the boxes cover the
    image; sodkit drops the empty background's zero-weight term: the plain MAE and F."""
    frame = np.zeros((H, W), np.uint8)
    frame[0, :], frame[-1, :], frame[:, 0], frame[:, -1] = 255, 255, 255, 255
    cases = [pair for pair in PAIRS if pair[0] in FULL] + [("frame", PAIRS[0][1], frame)]
    for name, pred, gt in cases:
        plain = reference_plain_f(pred, gt)
        result = ours("SI", [(name, pred, gt)])
        assert_close(result, plain, 1e-12, name)
    with pytest.warns(RuntimeWarning):  # the reference's NaN on the frame
        assert np.isnan(reference_size_invariance([(PAIRS[0][1], frame)], quiet=False)["siMAE"])


def test_msiou_equals_pysodmetrics():
    pairs = PAIRS[4:]  # two realistic pairs (MSIoU binarises at each of their ~250 levels)
    expected = reference_msiou((p, g) for _, p, g in pairs)
    assert_close(ours("MSIoU", pairs), expected, 1e-12)
    for name, pred, gt in pairs[2:]:
        assert_close(ours("MSIoU", [(name, pred, gt)]), reference_msiou([(pred, gt)]), 1e-12,
                     name)


def test_msiou_counts_gt_cells_as_the_reference_over_2048_edge_pixels():
    """The reference sums its GT edge cells in float16: above 2048 they round."""
    rng = np.random.default_rng(2)
    gt = np.where(rng.random((96, 96)) < 0.3, 255, 0).astype(np.uint8)  # ~5000 edge pixels
    pred = cv2.GaussianBlur(gt, (0, 0), 2)
    assert_close(ours("MSIoU", [("noise", pred, gt)]), reference_msiou([(pred, gt)]), 1e-12)


def test_boundary_iou_equals_birefnet():
    assert_close(ours("BIoU"), birefnet_biou((p, g) for _, p, g in PAIRS), 0)
    for name, pred, gt in PAIRS:
        assert_close(ours("BIoU", [(name, pred, gt)]), birefnet_biou([(pred, gt)]), 0, name)


def test_boundary_iou_band_scales_with_the_image():
    """At 600 x 800 the band is round(0.02 * 1000) = 20 erosions wide."""
    gt = np.zeros((600, 800), np.uint8)
    gt[100:500, 200:700] = 255
    pred = cv2.GaussianBlur(gt, (0, 0), 8)
    assert_close(ours("BIoU", [("big", pred, gt)]), birefnet_biou([(pred, gt)]), 0)


def test_mba_equals_birefnet_and_is_nan_without_a_gt_boundary():
    no_boundary = {"empty_gt", "empty_gt_empty_pred", "full_gt", "full_gt_full_pred"}
    pairs = [pair for pair in PAIRS if pair[0] not in no_boundary]
    assert ours("mBA", pairs)["mBA"] == birefnet_mba((p, g) for _, p, g in pairs)
    big = np.zeros((900, 1200), np.uint8)  # radii 1, 2, 3, 4, 5: (h + w) / 300 = 7
    cv2.circle(big, (600, 450), 300, 255, -1)
    pairs.append(("big", cv2.GaussianBlur(big, (0, 0), 6), big))
    for name, pred, gt in PAIRS + pairs[-1:]:
        expected = birefnet_mba([(pred, gt)])
        assert np.isnan(expected) == (name in no_boundary)
        assert_close(ours("mBA", [(name, pred, gt)]), {"mBA": expected}, 0, name)


def test_context_measure_equals_pysodmetrics():
    assert_close(ours("CM"), {"CM": reference_cm((p, g) for _, p, g in PAIRS)}, 1e-12)
    for name, pred, gt in PAIRS:
        assert_close(ours("CM", [(name, pred, gt)]), {"CM": reference_cm([(pred, gt)])}, 1e-12,
                     name)


def test_a_missing_optional_package_is_refused_in_one_line(monkeypatch):
    """Without scikit-image (here: a family pointed at a package that does not exist)."""
    monkeypatch.setitem(FAMILIES._items, "HCE", dataclasses.replace(FAMILIES["HCE"],
                                                             needs=("sodkit_no_such_package",)))
    from sodkit.extras import install_hint

    with pytest.raises(MissingPackage, match=r"^metric family HCE needs sodkit_no_such_package, "
                                             r"which is not installed: "
                                             + re.escape(install_hint("metrics")) + "$"):
        SODMetrics(families="HCE,MSE")


def test_camouflage_context_measure_equals_pysodmetrics():
    triples = [(pred, gt, camouflaged_image(gt, i)) for i, (_, pred, gt) in enumerate(PAIRS)]
    metrics = SODMetrics(families="CCM")
    for pred, gt, image in triples:
        metrics.update(pred, gt, image=image)
    assert_close(metrics.compute(), {"CCM": reference_ccm(triples)}, 1e-9)
    for (name, *_), triple in zip(PAIRS, triples, strict=True):
        single = SODMetrics(families="CCM")
        single.update(*triple[:2], image=triple[2])
        assert_close(single.compute(), {"CCM": reference_ccm([triple])}, 1e-9, name)


def test_ccm_needs_the_images():
    metrics = SODMetrics(families="CCM")
    with pytest.raises(ValueError, match="CCM reads the images"):
        metrics.update(PAIRS[0][1], PAIRS[0][2])
    with pytest.raises(ValueError, match="uint8 RGB images of the GT's size"):
        metrics.update(PAIRS[0][1], PAIRS[0][2], image=np.zeros((4, 4, 3), np.uint8))


def test_hce_skeleton_in_the_gt_box_equals_the_whole_image_skeleton():
    from skimage.morphology import skeletonize

    from sodkit.metrics.hce import skeleton

    rng = np.random.default_rng(1)
    masks = [gt > 128 for _, _, gt in PAIRS]
    masks += [cv2.dilate((rng.random((30, 41)) < 0.2).astype(np.uint8), np.ones((2, 2)))
              .astype(bool) for _ in range(20)]  # objects touching the borders
    for mask in masks:
        np.testing.assert_array_equal(skeleton(mask), skeletonize(mask))
