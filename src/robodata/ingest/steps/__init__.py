"""One module per ingestion asset step, each a function over one batch (Dagster-free).

raw_episodes -> aligned_tracks -> episodes -> qc_results -> episode_metadata (critical path);
derived: segments and features (non-critical leaves). robodata.ingest.pipeline runs them in order.
"""
