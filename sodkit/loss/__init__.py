"""Loss terms picked by name in ``loss.terms`` and the criterion that combines them.

Losses live outside the networks: a network returns logits, :class:`Criterion` turns them and the
mask into one scalar plus detached parts for logging.
"""

from . import ssim, structure, terms
from .criterion import Criterion, build_criterion
from .ssim import SSIMLoss
from .structure import structure_loss, wbce_loss, wiou_loss
from .terms import LOSSES, bce_loss, cel_loss, dice_loss, iou_loss, mae_loss

__all__ = ["LOSSES", "Criterion", "SSIMLoss", "bce_loss", "build_criterion", "cel_loss",
           "dice_loss", "iou_loss", "mae_loss", "ssim", "structure", "structure_loss", "terms",
           "wbce_loss", "wiou_loss"]
