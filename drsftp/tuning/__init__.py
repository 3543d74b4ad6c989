"""Buffer-tuning strategies behind one interface (sans-IO)."""

from .base import (
    NO_CHANGE,
    Decision,
    FixedTuning,
    PeerReport,
    Role,
    Sample,
    Tuning,
    check_spec,
    create,
    names,
    parse_size,
    register,
)
from .drs import DRSConfig, DRSTuning, RTTEstimator
from .receiver import DRSReceiver  # (DRSTuning(role) builds the role's class: both imported here)
from .sender import DRSSender

__all__ = [
    "NO_CHANGE",
    "DRSConfig",
    "DRSReceiver",
    "DRSSender",
    "DRSTuning",
    "Decision",
    "FixedTuning",
    "PeerReport",
    "RTTEstimator",
    "Role",
    "Sample",
    "Tuning",
    "check_spec",
    "create",
    "names",
    "parse_size",
    "register",
]
