"""`drsftp bench compete`: several flows sharing one bottleneck."""
