"""Schema of the benchmark store: versioned, append-only migrations (never edit a shipped entry's meaning; add a new
one). One list for both backends (benchmarks_db/store.py), in the SQL both DuckDB and PostgreSQL accept: DOUBLE
PRECISION (DuckDB's DOUBLE), VARCHAR, JSON (text on both), TIMESTAMP (naive UTC).

Canonical units: min (time to train), TFLOP/s (matmul), GB/s = 1e9 B/s (memory, copy, collective, storage);
sizes in bytes. Every value keeps its provenance: measurement -> run -> source (and system, software_env).
The links are kept by benchmarks_db/writer.py rather than declared as FOREIGN KEYs: DuckDB cannot delete a run and
its measurements in one transaction while a foreign key joins them (its documented foreign-key limitation), and
replacing a seed dataset or removing an upload must be a single transaction.
"""
from __future__ import annotations

MIGRATIONS: list[tuple[str, str]] = [
    ("initial schema: source, system, software_env, run, measurement, seed_dataset", """
CREATE TABLE source (
  source_id VARCHAR PRIMARY KEY,
  kind VARCHAR NOT NULL CHECK (kind IN ('published', 'user_submitted', 'illustrative')),
  dataset VARCHAR,                       -- seed dataset file it was loaded from; NULL for uploads
  title VARCHAR NOT NULL,
  publisher VARCHAR, url VARCHAR, source_commit VARCHAR, published_date VARCHAR,
  submitter VARCHAR, filename VARCHAR,
  file_sha256 VARCHAR UNIQUE,            -- exact-duplicate upload guard
  n_bytes BIGINT,
  ingested_at TIMESTAMP NOT NULL,        -- UTC
  notes VARCHAR);
CREATE TABLE system (
  system_id VARCHAR PRIMARY KEY,         -- sha256 of the normalised fields below
  system_name VARCHAR,
  device_type VARCHAR NOT NULL CHECK (device_type IN ('gpu', 'tpu', 'hpu', 'cpu', 'mps', 'unknown')),
  accelerator_id VARCHAR,                -- engine catalog id; NULL when the catalog lacks the part
  accelerator_raw VARCHAR NOT NULL,      -- the name as the source wrote it
  accelerators_per_node INTEGER, n_nodes INTEGER, n_accelerators INTEGER,
  interconnect VARCHAR, host_cpu VARCHAR, host_memory VARCHAR,
  extra JSON);
CREATE TABLE software_env (
  env_id VARCHAR PRIMARY KEY,            -- sha256 of the fields below
  os VARCHAR, kernel VARCHAR, driver_version VARCHAR, cuda_version VARCHAR, rocm_version VARCHAR,
  nccl_version VARCHAR, torch_version VARCHAR, numpy_version VARCHAR, blas VARCHAR, framework VARCHAR,
  python_version VARCHAR, extra JSON);
CREATE TABLE run (
  run_id VARCHAR PRIMARY KEY,
  source_id VARCHAR NOT NULL,            -- source.source_id
  system_id VARCHAR NOT NULL,            -- system.system_id
  env_id VARCHAR,                        -- software_env.env_id
  suite VARCHAR NOT NULL CHECK (suite IN ('mlperf_training', 'microbench')),
  benchmark VARCHAR NOT NULL,            -- gpt3, llama2_70b_lora, llama31_405b, ... | matmul, membw, h2d, collectives, storage
  tool VARCHAR NOT NULL, tool_version VARCHAR,
  mlperf_round VARCHAR, division VARCHAR, availability VARCHAR, submitter_org VARCHAR,
  started_at TIMESTAMP,                  -- UTC
  duration_s DOUBLE PRECISION,
  validation VARCHAR NOT NULL CHECK (validation IN ('accepted', 'flagged')),
  validation_msgs JSON NOT NULL,         -- list of strings: why flagged, notes from the checks
  content_sha256 VARCHAR NOT NULL UNIQUE,
  params JSON);
CREATE TABLE measurement (
  run_id VARCHAR NOT NULL,               -- run.run_id
  metric VARCHAR NOT NULL,               -- time_to_train | matmul_tflops | mem_bw | copy_bw | algbw | busbw | io_bw
  value DOUBLE PRECISION NOT NULL,
  unit VARCHAR NOT NULL CHECK (unit IN ('min', 'TFLOP/s', 'GB/s')),
  stat VARCHAR NOT NULL,                 -- score | single | median | mean | max
  n_samples INTEGER, value_min DOUBLE PRECISION, value_max DOUBLE PRECISION, cv_pct DOUBLE PRECISION,
  dtype VARCHAR, m BIGINT, n BIGINT, k BIGINT,
  op VARCHAR, message_bytes BIGINT, n_ranks INTEGER, n_nodes INTEGER, backend VARCHAR,
  peak_value DOUBLE PRECISION, efficiency DOUBLE PRECISION,  -- catalog datasheet peak in the same unit, value / peak
  params JSON);
CREATE TABLE seed_dataset (
  dataset VARCHAR PRIMARY KEY, sha256 VARCHAR NOT NULL, n_rows INTEGER NOT NULL, loaded_at TIMESTAMP NOT NULL);
CREATE INDEX measurement_run ON measurement(run_id);
CREATE INDEX run_benchmark ON run(benchmark);
CREATE INDEX system_accelerator ON system(accelerator_id);
"""),
    ("saved scenarios: content-addressed short id, name, created time, scenario JSON (benchmarks_db/scenarios.py)", """
CREATE TABLE saved_scenario (
  scenario_id VARCHAR PRIMARY KEY,       -- first 10 base32 characters of the SHA-256 of the canonical JSON
  name VARCHAR NOT NULL,
  created_at TIMESTAMP NOT NULL,         -- UTC
  scenario_json VARCHAR NOT NULL);       -- canonical JSON: non-default fields, sorted keys
"""),
    ("uploads: who uploaded them (the reverse proxy's identity header) and whether the operator trusts them", """
ALTER TABLE source ADD COLUMN uploaded_by VARCHAR;   -- the signed-on user (APP_IDENTITY_HEADER); NULL: anonymous
ALTER TABLE source ADD COLUMN trusted_by VARCHAR;    -- who marked the upload trusted (python -m benchmarks_db trust,
ALTER TABLE source ADD COLUMN trusted_at TIMESTAMP;  -- or APP_TRUSTED_UPLOADERS); NULL: not used for calibration
"""),
    ("saved scenarios: the page options (the question the answer answers), the owner (the reverse proxy's identity "
     "header) and who they are listed to; existing rows keep their ids, no owner, shared", """
CREATE TABLE saved_scenario_owned (
  scenario_id VARCHAR PRIMARY KEY,       -- first 10 base32 characters of the SHA-256 of scenario, options and owner
  name VARCHAR NOT NULL,
  created_at TIMESTAMP NOT NULL,         -- UTC
  scenario_json VARCHAR NOT NULL,        -- canonical JSON: non-default fields, sorted keys
  options_json VARCHAR NOT NULL DEFAULT '{}',   -- the page options (the question), canonical like scenario_json
  owner VARCHAR,                         -- the signed-on user (APP_IDENTITY_HEADER); NULL: saved without one
  visibility VARCHAR NOT NULL DEFAULT 'shared' CHECK (visibility IN ('private', 'shared')));  -- private: not listed
INSERT INTO saved_scenario_owned (scenario_id, name, created_at, scenario_json)
  SELECT scenario_id, name, created_at, scenario_json FROM saved_scenario;
DROP TABLE saved_scenario;
ALTER TABLE saved_scenario_owned RENAME TO saved_scenario;
"""),
    ("training runs: the step times of a short real run (benchmarks_db/step_logs.py) as suite 'training_run', metric "
     "step_time in seconds; DuckDB cannot alter a CHECK constraint, so run and measurement are rebuilt with the wider "
     "ones and their rows copied", """
CREATE TABLE run_v5 (
  run_id VARCHAR PRIMARY KEY,
  source_id VARCHAR NOT NULL,
  system_id VARCHAR NOT NULL,
  env_id VARCHAR,
  suite VARCHAR NOT NULL CHECK (suite IN ('mlperf_training', 'microbench', 'training_run')),
  benchmark VARCHAR NOT NULL,            -- ... | step_time (a training run's step-time log)
  tool VARCHAR NOT NULL, tool_version VARCHAR,
  mlperf_round VARCHAR, division VARCHAR, availability VARCHAR, submitter_org VARCHAR,
  started_at TIMESTAMP,
  duration_s DOUBLE PRECISION,
  validation VARCHAR NOT NULL CHECK (validation IN ('accepted', 'flagged')),
  validation_msgs JSON NOT NULL,
  content_sha256 VARCHAR NOT NULL UNIQUE,
  params JSON);                          -- training_run: {"scenario": the scenario it ran, "log_format", "framework"}
INSERT INTO run_v5 SELECT * FROM run;
DROP INDEX run_benchmark;
DROP TABLE run;
ALTER TABLE run_v5 RENAME TO run;
CREATE INDEX run_benchmark ON run(benchmark);
CREATE TABLE measurement_v5 (
  run_id VARCHAR NOT NULL,
  metric VARCHAR NOT NULL,               -- ... | step_time
  value DOUBLE PRECISION NOT NULL,
  unit VARCHAR NOT NULL CHECK (unit IN ('min', 'TFLOP/s', 'GB/s', 's')),
  stat VARCHAR NOT NULL,
  n_samples INTEGER, value_min DOUBLE PRECISION, value_max DOUBLE PRECISION, cv_pct DOUBLE PRECISION,
  dtype VARCHAR, m BIGINT, n BIGINT, k BIGINT,
  op VARCHAR, message_bytes BIGINT, n_ranks INTEGER, n_nodes INTEGER, backend VARCHAR,
  peak_value DOUBLE PRECISION, efficiency DOUBLE PRECISION,
  params JSON);
INSERT INTO measurement_v5 SELECT * FROM measurement;
DROP INDEX measurement_run;
DROP TABLE measurement;
ALTER TABLE measurement_v5 RENAME TO measurement;
CREATE INDEX measurement_run ON measurement(run_id);
"""),
]
