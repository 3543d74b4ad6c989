"""What an operator runs a server with, whatever its protocol: users, the transfer log, metrics."""
