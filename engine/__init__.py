"""Plumbing shared by train.py and evaluate.py: build from config, checkpoints, W&B, evaluation."""
