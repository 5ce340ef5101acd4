"""Results people look at and publish.

* ``tables``: the files every evaluation writes (``results.{json,md,csv}``, ``curves/*.png``,
  ``curves.json``, ``results_per_image.csv``);
* ``ranking``: which way each metric is better and the best three per column;
* ``latex`` / ``xlsx``: paper tables (booktabs; datasets as column groups, methods as rows);
* ``sources`` / ``training``: reading run folders and ``sodkit eval`` outputs back, the training
  curves from TensorBoard events (or ``train.log``) and checkpoints' epoch / step, without torch;
* ``confine`` / ``inputs``: what a received folder may make the report read (nothing outside it
  but the input folders its evaluation recorded), and each file checked for its shape;
* ``cells``: text cells of CSV and xlsx tables that no spreadsheet evaluates;
* ``html``: the self-contained ``report.html`` of one run or a comparison of several;
* ``named_outputs``: the command-line options of the paper tables and the rules for writing files.

The names of ``tables`` are loaded on first use, so that ``sodkit --help`` (which reads the
options in ``named_outputs``) does not import numpy, OpenCV or the metrics.
"""

from __future__ import annotations

import importlib
from typing import Any

_TABLES = ("PER_IMAGE_COLUMNS", "STANDARD_ORDER", "markdown_table", "metric_columns",
           "per_image_rows", "plot_curves", "read_per_image_csv", "write_curves_json",
           "write_per_image_csv", "write_result_files", "write_results")
__all__ = list(_TABLES)


def __getattr__(name: str) -> Any:
    if name in _TABLES:
        return getattr(importlib.import_module(".tables", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
