"""Training: the paper's recipe (label-smoothed loss, inverse-sqrt schedule, checkpoint averaging),
resumable bit for bit, on one device or several through torchrun.

Read in this order: ``config`` (TrainConfig, whose fields are the command line's options), ``objective`` (the
loss), ``schedule`` (inverse-sqrt), ``state`` (RNG, checkpoint files, averaging, the log), ``kernels`` (attention
backend, deterministic algorithms), ``distributed`` (torchrun plumbing), ``run_folder`` (the run's files and what a
resume may change), ``watch`` (the bar, the validation lines, stop signals), ``trainer`` (the Trainer), ``cli``
(``canlib train``).
"""

from canlib.training.config import TrainConfig
from canlib.training.objective import chunked_label_smoothed_loss, label_smoothed_nll_loss, online_label_smoothed_loss
from canlib.training.trainer import NonFiniteLossError, Trainer

__all__ = [
    "TrainConfig",
    "Trainer",
    "NonFiniteLossError",
    "label_smoothed_nll_loss",
    "chunked_label_smoothed_loss",
    "online_label_smoothed_loss",
]
