"""Plotting functions per experiment, grouped by paper; each registers itself by experiment name."""
