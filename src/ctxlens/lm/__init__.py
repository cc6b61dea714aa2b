"""Loading models and capturing exactly the internal states the analyses need."""

from ctxlens.lm.capture import Capture
from ctxlens.lm.families import FAMILIES, Family, families, get_family
from ctxlens.lm.info import ModelInfo, read_info
from ctxlens.lm.loading import from_model, load
from ctxlens.lm.model import LM

__all__ = ["Capture", "FAMILIES", "Family", "LM", "ModelInfo", "families", "from_model", "get_family", "load",
           "read_info"]
