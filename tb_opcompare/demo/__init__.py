"""Small real training scripts for the demo and the tutorial (each imports its framework
only when run)."""
