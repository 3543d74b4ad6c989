"""Extended block mode on the client (GFD.20; docs/PARALLEL.md, "Extended block mode"): the
streams a get or put shares, one stream, the put's sending threads."""
