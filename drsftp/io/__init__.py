"""The I/O edge: setsockopt/TCP_INFO (sockopt, the one module that touches
them), the tuner that drives a tuning on a socket, TLS over memory BIOs and
its policy, positional file writes."""
