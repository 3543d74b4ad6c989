"""FTP protocol pieces with no sockets: replies, the DRS command, session state."""
