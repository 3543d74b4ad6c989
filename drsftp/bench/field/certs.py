"""The run's certificates: drsftp/bench/common/certs.py, which the
third-party bench shares."""

from ..common.certs import TLSFiles, make_certs

__all__ = ["TLSFiles", "make_certs"]
