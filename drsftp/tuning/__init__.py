"""Buffer-tuning strategies behind one interface (sans-IO)."""

from .base import (  # noqa: F401
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
from .drs import DRSConfig, DRSTuning, RTTEstimator  # noqa: F401
