"""``ctxlens profile``: how well one model uses its context, the four papers' measurements fitted
to a time budget (``command``: running it; ``suite``: what is measured; ``budget``: how much)."""

from ctxlens.profile.command import profile

__all__ = ["profile"]
