"""kernel layer."""
