"""drsftp's client over HTTPS/WebDAV (docs/HTTP.md, "Client"): get, put and
ls on ``https://`` URLs through one aiohttp session (decision 0033)."""
