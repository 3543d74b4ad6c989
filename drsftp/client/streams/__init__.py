"""Parallel streams: -P N|auto over extended block mode (GFD.20) or byte-range
sessions (docs/PARALLEL.md)."""
