"""The control session: the control connection and its reply routing, the flow
table's driver, log-in, credentials, TLS (docs/DESIGN.md, "Client")."""
