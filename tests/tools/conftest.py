"""Tests that call tools.experiment.main with train.py mocked must not write records into the repository
(a multirun/ left by a real run would be read): the records step is a no-op unless a test asks for it."""

import pytest


@pytest.fixture(autouse=True)
def no_records_into_the_repository(monkeypatch):
    from tools import experiment

    monkeypatch.setattr(experiment, "write_records", lambda name, at: None)
