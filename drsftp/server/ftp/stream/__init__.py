"""Stream-mode data connections on the server (RFC 959 3.4.1): the channel, uploads, final replies."""
