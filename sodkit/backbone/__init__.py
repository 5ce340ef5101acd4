"""Backbones: any timm model with ``features_only``, and local pretrained weights."""

from .timm_backbone import Backbone, create_features_model
from .weights import load_matching, read_state_dict

__all__ = ["Backbone", "create_features_model", "load_matching", "read_state_dict"]
