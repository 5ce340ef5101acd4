"""The package's version, in a module of its own: library code that records it (run markers,
model files, reports) imports this, not the package root, whose lazy ``sodkit.load`` would
otherwise tie every such module to the whole API."""

__version__ = "0.2.0"
