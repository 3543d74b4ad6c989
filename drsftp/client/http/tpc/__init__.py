"""`drsftp copy https://A/... https://B/...`: an HTTP third-party copy driven
from the client (docs/HTTP.md, "drsftp copy over HTTPS"): the COPY, its
perf markers, the remote side's macaroon, trees, and copies between
ftp:// and https:// that go through this host."""
