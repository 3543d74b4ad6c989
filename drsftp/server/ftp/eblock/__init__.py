"""Extended block mode (MODE E, GFD.20) on the server: commands, sessions, streams, transfers, TLS."""
