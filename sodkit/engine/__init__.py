"""Training, evaluation and the runtime that owns devices, ranks, precision and files."""
