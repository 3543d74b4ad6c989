"""`drsftp bench third-party`: server-to-server copies on a three-node topology."""
