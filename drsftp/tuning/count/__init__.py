"""How many streams and sessions, sans-IO: -P auto (streams, window), a copy's -P auto
(pathstreams), -c auto (fleet), and how they share a path with other traffic (sharing);
docs/PARALLEL.md, "-P auto", and docs/DATASETS.md, "Sessions x streams"."""
