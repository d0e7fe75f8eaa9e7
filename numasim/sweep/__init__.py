"""sweep layer."""
