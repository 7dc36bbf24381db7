"""Training on a manifest partition, with checkpoints, resume and lineage."""
