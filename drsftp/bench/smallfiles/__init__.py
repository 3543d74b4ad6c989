"""`drsftp bench smallfiles`: trees of many small files on loopback, time and memory of both ends."""
