"""Plumbing shared by train.py and evaluate.py: config checks, devices and processes, the training epoch (its
step, its meters) and its schedule, checkpoints and resuming, W&B, evaluation."""
