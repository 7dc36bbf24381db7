"""Workload-aware layout: derive container settings from a ReadPattern and re-lay existing data.

calibration  short measurements on this machine (bytes and decode time per frame type, I/O costs;
             the record is robodata.container.calibration)
costmodel    predicted loader cost of a candidate layout for a read pattern
advisor      enumerate candidates, rank by the model, measure the top ones, choose
alternatives the advisor's alternatives: predicted rows, measured on rewritten samples, of-best fractions
rewrite      re-encode / re-chunk one container into a layout, verified, atomically renamed
relayout     a batch of catalog rows -> new container versions -> one catalog pointer merge

The advised layout (LayoutPlan) lives with the container it lays out (robodata.container.plan) and
the GOP model with the codecs (robodata.codecs.gop): ingestion writes episodes in a plan and prices
reads with both, and never imports this package (which converts sample recordings through ingestion).
"""

from robodata.layout.config import AdvisorConfig, StoreModel

__all__ = ["AdvisorConfig", "StoreModel"]
