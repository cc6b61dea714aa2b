"""The papers' procedures, one module each; see ``registry.get_experiment``."""

from ctxlens.experiments.base import DemoStep, Experiment, Smoke, make_config
from ctxlens.experiments.registry import experiments, get_experiment, register

__all__ = ["DemoStep", "Experiment", "Smoke", "experiments", "get_experiment", "make_config", "register"]
