"""The folder evaluator: saved predictions of any number of methods measured against GT folders
(``sodkit eval``), usable from Python without the command line."""
