"""Training: the paper's recipe (label-smoothed loss, inverse-sqrt schedule, checkpoint averaging),
resumable bit for bit, on one device or several through torchrun."""
from canlib.training.trainer import TrainConfig, Trainer, label_smoothed_nll_loss

__all__ = ["TrainConfig", "Trainer", "label_smoothed_nll_loss"]
