"""sodkit: train, evaluate and run salient object detection models."""

__version__ = "0.2.0"
