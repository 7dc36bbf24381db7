"""Looking at the data: episodes and loader samples in Rerun (`robodata view`), and small
PNG/markdown previews of batches, quarantined episodes and manifests.

rerun-sdk is the optional extra `[viz]`; only robodata.viz.record and robodata.viz.sample import it.
"""
