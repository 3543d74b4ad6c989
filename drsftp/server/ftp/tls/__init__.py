"""FTPS on the server (RFC 4217): data channels under PROT P, SSCN, implicit TLS."""
