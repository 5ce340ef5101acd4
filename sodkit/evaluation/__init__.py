"""The folder evaluator: saved predictions of any number of methods measured against GT folders,
as ``sodkit eval`` does, and usable from Python without the command line::

    from sodkit.evaluation import EvalRequest, evaluate_folders

    tables = evaluate_folders(EvalRequest(gt=["ECSSD=data/ECSSD/GT"],
                                          pred=["MINet=preds/MINet"], out="results"))

The steps, a module each: the request (:mod:`.request`) becomes a plan of datasets (:mod:`.job`,
:mod:`.plan`: methods, PySODEvalToolkit's files, selection, groups, images, trimaps); each
dataset is measured (:mod:`.measure`, in worker processes :mod:`.pool`, on torchrun's ranks
:mod:`.ranks`), its intervals bootstrapped (:mod:`.intervals`) and its files written
(:mod:`.files`, :mod:`.rerun`) through :mod:`sodkit.report`'s result files. Importing this
package imports neither numpy nor torch.
"""

from .request import EvalRequest
from .run import Tables, evaluate_folders

__all__ = ["EvalRequest", "Tables", "evaluate_folders"]
