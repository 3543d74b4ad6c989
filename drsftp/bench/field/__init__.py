"""`drsftp bench field`: drsftp beside the field's tools on one link."""
