"""`drsftp datapath` and `drsftp netemcheck`: checks of the data path and of the emulated link."""
