"""Workload-aware layout: derive container settings from a ReadPattern and re-lay existing data.

calibration  short measurements on this machine (bytes and decode time per frame type, I/O costs)
costmodel    predicted loader cost of a candidate layout for a read pattern
advisor      enumerate candidates, rank by the model, measure the top ones, choose
plan         the advised layout (LayoutPlan) and how it applies to an episode's streams
rewrite      re-encode / re-chunk one container into a layout, verified, atomically renamed
relayout     a batch of catalog rows -> new container versions -> one catalog pointer merge
"""

from robodata.layout.config import AdvisorConfig, StoreModel
from robodata.layout.plan import LayoutPlan

__all__ = ["AdvisorConfig", "StoreModel", "LayoutPlan"]
