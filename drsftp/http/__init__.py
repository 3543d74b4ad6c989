"""HTTP's rules drsftp's HTTP front and client will share, sans-IO: byte ranges
(RFC 9110 sec. 14) and instance digests (RFC 3230)."""
