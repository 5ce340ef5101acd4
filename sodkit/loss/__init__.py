"""Loss terms picked by name in ``loss.terms`` and the criterion that combines them.

Losses live outside the networks: a network returns logits, :class:`Criterion` turns them and the
mask into one scalar plus detached parts for logging.
"""

from . import terms
from .criterion import Criterion, build_criterion
from .terms import LOSSES, bce_loss, dice_loss, iou_loss

__all__ = ["LOSSES", "Criterion", "bce_loss", "build_criterion", "dice_loss", "iou_loss", "terms"]
