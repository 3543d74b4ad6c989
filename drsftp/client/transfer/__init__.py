"""One transfer: get and put over one data connection, the data-connection
opener, the DRS exchange's driver, resume, verify, --max-time
(docs/DESIGN.md, "Client")."""
