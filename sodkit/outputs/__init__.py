"""Outputs by kind: which command made a folder, and which files it wrote there.

Every folder sodkit creates for its outputs carries a marker, ``.sodkit-run``: JSON with the
*kind* of the command that made it (``train``, ``test``, ``eval``, ``predict``, ``report``).
Beside it, ``.sodkit-files`` records each file sodkit wrote into the folder with the file's
sha256 at write time (JSON lines, appended; a path's last line counts). From the two follow the
rules every command obeys (docs/reliability.md, section 3):

* a command writes into a marked folder only when the folder is of its own kind; ``--force``
  does not change that (the folder is another command's output, whose files belong together);
* an existing file is replaced only when the record holds its current hash, i.e. sodkit wrote
  it and nobody changed it since; otherwise only with ``--force`` where the command has one;
* ``--overwrite`` deletes a folder of its own kind only when every file in it is such a file
  (plus, for a training run, its checkpoints, TensorBoard events and log: :data:`WORKING`).

Single files named by the user (``--latex``, ``--xlsx``, ``report --out``) follow the same rules:
they are recorded in the ``.sodkit-files`` of the marked folder they lie in, or else of their own
folder (which is not marked: it stays the user's). Light imports only (no torch, no numpy).
"""

from .folder import KINDS, MARKER, RECORD, WORKING, OutputFolder, Record, is_owned, kind_of
from .rules import (
    check_claim,
    check_removable,
    claim,
    removal_problem,
    remove_run_folder,
    single_file,
    write_single,
)

__all__ = ["KINDS", "MARKER", "RECORD", "WORKING", "OutputFolder", "Record", "check_claim",
           "check_removable", "claim", "is_owned", "kind_of", "removal_problem",
           "remove_run_folder", "single_file", "write_single"]
