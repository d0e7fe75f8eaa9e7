"""calibrate layer."""
