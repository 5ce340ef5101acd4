"""Inference: an image becomes a mask, the same way for every caller.

One image's way through, each step one module::

    uint8 RGB (H, W, 3)  -- preprocess.py: the pipeline's transform (resize, normalise)
    -> (3, S, S) float32 -- forward.py: predict_scores (the network, TTA; the one forward)
    -> scores (1, C, h, w) -- postprocess.py: the resize back (probability map, uint8 mask)
    -> map (H, W)        -- encode.py + render.py: the PNG bytes of each --save kind

``pipelines.py`` pairs each input side with its output side by name (``data.preprocess``:
sodkit, minet, f3net, birefnet, birefnet-card) in one registry. The trainer's evaluation,
``sodkit predict`` and ``test``, the server and the Python API all go through these; what
knows about ranks (each rank's shard, rank 0 writing every rank's files in lockstep rounds) is
the engine's (:mod:`sodkit.engine.predictor`, :mod:`sodkit.engine.rounds`), and reading files
is the caller's (:mod:`sodkit.imageio`, :mod:`sodkit.image_input`).

This package imports no network, dataset, engine or command: it needs a callable network and
arrays, so the data loaders can use its transforms and anything above can run it. Runtimes
(issue 35): ``onnx_network.py`` is an onnxruntime session in a network's shape, so
:func:`forward.predict_scores` runs it as it runs PyTorch's network; which one runs, and at
which precision, is chosen where the model is loaded (:mod:`sodkit.runners`). Shaped for what
comes next, not built yet:

- a server batching several requests: decoded images -> the transform -> one stacked forward
  -> each image's scores -> :func:`encode.encode_outputs` (:mod:`sodkit.serve.model` does so);
- video: frames are arrays, as :func:`forward.predict_arrays` takes them, streamed in batches.

Light on purpose: nothing is imported here, so ``from sodkit.inference.render import MODES``
(an argparse type) imports no torch. The registry fills itself when ``pipelines`` is imported.
"""
