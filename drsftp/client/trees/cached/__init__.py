"""Dataset transfers on cached extended-block data channels (GFD.20; GridFTP's -fast -pp; docs/DATASETS.md)."""
