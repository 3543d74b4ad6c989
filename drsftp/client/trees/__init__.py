"""Trees: dataset jobs (-r, --sync, -c auto), the remote walk, cached data
channels (docs/DATASETS.md)."""
