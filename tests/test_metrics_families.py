"""The optional metric families equal their references (PySODMetrics 1.6.2, BiRefNet's
evaluation) on realistic pairs and edge cases, and merge exactly like the standard set."""

from __future__ import annotations

import numpy as np
import pytest

from sodkit.metrics import SODMetrics
from sodkit.metrics.families import FAMILIES, resolve
from tests.families_fixtures import birefnet_mse, edge_pairs, reference_hce

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
    assert resolve("all") == tuple(FAMILIES)
    assert resolve("mse") == ("MSE",)
    with pytest.raises(ValueError, match="unknown metric family nope; choose from MSE"):
        resolve("MSE,nope")


def test_mse_equals_birefnet():
    expected = birefnet_mse((p, g) for _, p, g in PAIRS)
    assert ours("MSE")["MSE"] == expected  # the same float64 operations: the same bits
    for name, pred, gt in PAIRS:
        assert ours("MSE", [(name, pred, gt)])["MSE"] == birefnet_mse([(pred, gt)]), name


def test_merged_halves_equal_the_whole_with_every_family():
    whole = ours("all")
    first, second = SODMetrics(families="all"), SODMetrics(families="all")
    for i, (_, pred, gt) in enumerate(PAIRS):
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
