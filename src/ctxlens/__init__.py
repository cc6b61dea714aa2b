"""ctxlens: how much, and how well, does a language model use long context?"""

from ctxlens.core.errors import CtxlensError
from ctxlens.lm import LM, families, load

__version__ = "0.1.0"
__all__ = ["CtxlensError", "LM", "families", "load", "__version__"]
