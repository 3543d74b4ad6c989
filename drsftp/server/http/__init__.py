"""`drsftp serve --http-port`: HTTPS/WebDAV beside the FTP server, in a
thread of the same process (docs/HTTP.md, docs/decisions/0033-aiohttp-for-http.md).

front: the listener, its thread and loop, connection limits, shutdown;
service: one request from authentication to its status; auth: HTTP Basic
against the FTP side's users; paths: URL paths inside a home; files: GET
and HEAD; uploads: PUT and partial PUT; dav: the WebDAV methods; drs: the
socket controllers; problem: a status with its sentence.
"""
