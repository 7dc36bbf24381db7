-- Extra setup for the Dagster Postgres database, on top of the schema Dagster manages itself
-- (`dagster instance migrate` creates and upgrades Dagster's own tables and indexes).
-- Apply once after the first deploy and after upgrades (idempotent, no table locks):
--   psql "$DAGSTER_PG_URL" -f deploy/postgres-indexes.sql
-- tests/platform/test_deploy_instance.py applies it to a real cluster.

-- The retention job (jobs/maintenance.py) selects finished runs by create_timestamp, oldest first;
-- Dagster's idx_run_range leads with update_timestamp, so give it its own index.
CREATE INDEX CONCURRENTLY IF NOT EXISTS robodata_runs_by_create_timestamp ON runs (create_timestamp);

-- event_logs and runs lose rows every day (pruning); vacuum them early so freed space is reused
-- instead of the tables and their indexes growing without bound.
ALTER TABLE event_logs SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.01);
ALTER TABLE runs SET (autovacuum_vacuum_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.02);
ALTER TABLE run_tags SET (autovacuum_vacuum_scale_factor = 0.05);
