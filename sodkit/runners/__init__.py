"""Runtimes of the forward at inference: PyTorch or onnxruntime, fp32 or reduced precision.

``choice.py`` checks ``--runtime`` / ``--precision`` and resolves ``auto``; ``onnx_cache.py``
exports a trained model's graph once and keeps it in the cache; ``quantize.py`` makes its int8
graph; ``load.py`` gives the forward to run, a network either way
(:mod:`sodkit.inference.onnx_network`). docs/inference.md says what each costs and gains.
Light: nothing is imported here.
"""
