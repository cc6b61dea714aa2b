"""The papers' procedures, one module each; see ``registry.get_experiment``."""

from ctxlens.experiments.base import Experiment, make_config
from ctxlens.experiments.registry import experiments, get_experiment, register

__all__ = ["Experiment", "experiments", "get_experiment", "make_config", "register"]
