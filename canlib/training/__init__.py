"""Training: the paper's recipe (label-smoothed loss, inverse-sqrt schedule, checkpoint averaging),
resumable bit for bit, on one device or several through torchrun."""
