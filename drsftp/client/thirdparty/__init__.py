"""Third-party copies: one file or a tree from server to server (docs/THIRDPARTY.md)."""
