"""Imported first by the test entry points that stand in for the ``sodkit`` command (torchrun's
workers, the targets of signals): their imports run with the cyclic garbage collector off, as
the command's own do (:func:`sodkit.cli.console_main`, :mod:`sodkit.import_gc`)."""

from sodkit import import_gc

import_gc.install()
