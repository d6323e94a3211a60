-- The results store's schema version 1 (pytest-ortperf 0.1) for sqlite, as
-- SQLAlchemy's create_all wrote it: tests migrate stores made from it.
CREATE TABLE environments (
	id INTEGER NOT NULL,
	digest VARCHAR(64) NOT NULL,
	fingerprint VARCHAR(64),
	ort_version VARCHAR(64),
	providers JSON,
	onnx_version VARCHAR(64),
	numpy_version VARCHAR(64),
	python_version VARCHAR(64),
	os VARCHAR(255),
	cpu_model VARCHAR(255),
	cores INTEGER,
	memory BIGINT,
	extra JSON,
	PRIMARY KEY (id),
	UNIQUE (digest)
);

CREATE TABLE schema_version (
	version INTEGER NOT NULL,
	PRIMARY KEY (version)
);

CREATE TABLE runs (
	id INTEGER NOT NULL,
	started FLOAT NOT NULL,
	finished FLOAT NOT NULL,
	"commit" VARCHAR(64),
	branch VARCHAR(255),
	dirty BOOLEAN,
	command_line TEXT,
	environment_id INTEGER,
	extra JSON,
	PRIMARY KEY (id),
	FOREIGN KEY(environment_id) REFERENCES environments (id)
);

CREATE INDEX ix_runs_started ON runs (started);

CREATE TABLE measurements (
	id INTEGER NOT NULL,
	run_id INTEGER NOT NULL,
	test TEXT NOT NULL,
	name TEXT NOT NULL,
	kind VARCHAR(32) NOT NULL,
	api VARCHAR(64),
	measured BOOLEAN,
	calls_per_block INTEGER,
	session JSON,
	n INTEGER,
	median FLOAT,
	mean FLOAT,
	std FLOAT,
	min FLOAT,
	max FLOAT,
	p90 FLOAT,
	p99 FLOAT,
	iqr FLOAT,
	ratio FLOAT,
	low FLOAT,
	high FLOAT,
	confidence FLOAT,
	ref_median FLOAT,
	samples BLOB,
	ref_samples BLOB,
	extra JSON,
	PRIMARY KEY (id),
	FOREIGN KEY(run_id) REFERENCES runs (id)
);

CREATE INDEX ix_measurements_test ON measurements (test);

CREATE INDEX ix_measurements_run ON measurements (run_id);

CREATE INDEX ix_measurements_name ON measurements (name);

CREATE TABLE profile_ops (
	id INTEGER NOT NULL,
	measurement_id INTEGER NOT NULL,
	op_type VARCHAR(255) NOT NULL,
	total_us FLOAT,
	count INTEGER,
	share FLOAT,
	PRIMARY KEY (id),
	FOREIGN KEY(measurement_id) REFERENCES measurements (id)
);

CREATE INDEX ix_profile_ops_measurement ON profile_ops (measurement_id);

INSERT INTO schema_version (version) VALUES (1);
