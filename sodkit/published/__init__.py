"""The authors' published weights: the releases ``sodkit import-weights`` knows (one module per
network registers its own, see :mod:`sodkit.published.formats`) and their conversion into
sodkit model files (:mod:`sodkit.published.convert`); the models by name (``catalogue.yaml``,
:mod:`~sodkit.published.catalogue`), fetched, verified, converted and cached by
:func:`sodkit.published.fetch.fetch_model`."""

from .formats import Release, format_names, get_format, recipe_path, register

__all__ = ["Release", "format_names", "get_format", "recipe_path", "register"]
