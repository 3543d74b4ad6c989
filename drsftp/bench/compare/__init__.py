"""`drsftp bench compare`: the tunings side by side over a matrix of paths."""
