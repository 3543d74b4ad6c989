"""A dataset job: its queue of planned files, sessions, fleet of sessions x
streams, command line, view and result (docs/DATASETS.md, "What a job does")."""
