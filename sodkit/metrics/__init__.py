"""Batched, mergeable SOD metrics equal to PySODMetrics 1.6 (the field's reference).

``SODMetrics`` accumulates (prediction, GT) pairs and computes, once, every standard metric:

* ``MAE``, ``Smeasure`` (alpha 0.5), ``wFmeasure`` (beta 1);
* ``maxFm``, ``meanFm``, ``adpFm`` (beta^2 0.3), ``maxEm``, ``meanEm``, ``adpEm``;
* FmeasureV2's binary family, each as ``max<Name>``, ``mean<Name>``, ``adp<Name>`` with Name in
  Precision, Recall, Specificity, Dice, IoU, BER, Kappa, Accuracy (overall accuracy);
* curves over 256 thresholds (index i is threshold 255 - i, as in PySODMetrics):
  ``precision_curve``, ``recall_curve``, ``fm_curve``, ``em_curve``, and ``specificity_curve``,
  ``dice_curve``, ``iou_curve``, ``ber_curve``, ``kappa_curve``, ``accuracy_curve``.

``max`` / ``mean`` are taken on the curve averaged over images; ``adp`` uses each image's
adaptive threshold min(2 * mean, 1). For BER lower is better; its ``max`` is still the maximum.
Like PySODMetrics, ``Smeasure`` is NaN for an image whose GT centroid lies on the last row or
column (an empty quadrant), and so is the dataset's mean then (a warning names the images).

Distributed use: each process calls ``update(pred, gt, index=dataset_index)`` for its own
images; rank 0 gathers every ``state_dict()``, ``load_state_dict``s each into a ``SODMetrics``,
``merge``s them and calls ``compute()`` once: the result equals a single pass bit for bit.
CPU inputs are measured with numpy/OpenCV, CUDA tensors' histograms with torch on the device
(the weighted F-measure always runs on the CPU).
"""

from .results import CURVE_KEYS, METRIC_KEYS, PER_IMAGE_KEYS, STANDARD_KEYS, scalar_metrics
from .sod import SODMetrics

__all__ = ["CURVE_KEYS", "METRIC_KEYS", "PER_IMAGE_KEYS", "STANDARD_KEYS", "SODMetrics",
           "scalar_metrics"]
