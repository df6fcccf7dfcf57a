"""Plumbing shared by train.py and evaluate.py: config checks, devices and processes, the training epoch and
its schedule, checkpoints and resuming, W&B, evaluation."""
