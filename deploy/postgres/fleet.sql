-- The kfuse fleet store: the second tier behind each node's SQLite store.
-- Apply once as a database owner (psql -v ON_ERROR_STOP=1 -d kfuse -f fleet.sql),
-- then give nodes the login roles below: tuning nodes log in as members of
-- kfuse_fleet_writer, serving-only nodes as members of kfuse_fleet_reader.
-- Idempotent: safe to apply again.

CREATE TABLE IF NOT EXISTS kfuse_fleet_meta (
  schema_version integer NOT NULL
);
INSERT INTO kfuse_fleet_meta (schema_version)
  SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM kfuse_fleet_meta);

-- Content-addressed payloads (kfuse.storage.v1.Decision or Artifact).
CREATE TABLE IF NOT EXISTS kfuse_blobs (
  sha256 text PRIMARY KEY CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  bytes  bigint NOT NULL,
  data   bytea NOT NULL
);

-- One row per published entry; never updated (ON CONFLICT DO NOTHING).
CREATE TABLE IF NOT EXISTS kfuse_entries (
  kind            text NOT NULL CHECK (kind IN ('decision', 'artifact')),
  key             text NOT NULL,
  chain           text NOT NULL,
  spec            text NOT NULL,
  device          text NOT NULL,
  toolchain       text NOT NULL,
  generator       text NOT NULL,
  family          text NOT NULL,
  arch            text NOT NULL,
  device_name     text NOT NULL,
  state           text NOT NULL,
  description     text NOT NULL,
  blob_sha256     text NOT NULL REFERENCES kfuse_blobs (sha256),
  -- Provenance: who made it, when, with which kfuse, signed by whom.
  node            text NOT NULL,
  created_unix_ms bigint NOT NULL,
  kfuse_version   text NOT NULL,
  published_at    timestamptz NOT NULL DEFAULT now(),
  signer          bytea NOT NULL,
  signature       bytea NOT NULL,
  PRIMARY KEY (kind, key)
);
CREATE INDEX IF NOT EXISTS kfuse_entries_chain ON kfuse_entries (chain);

-- One tuning lease per key, so N nodes missing the same key tune it once.
CREATE TABLE IF NOT EXISTS kfuse_leases (
  key        text PRIMARY KEY,
  holder     text NOT NULL,
  expires_at timestamptz NOT NULL
);

DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'kfuse_fleet_reader') THEN
    CREATE ROLE kfuse_fleet_reader NOLOGIN;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'kfuse_fleet_writer') THEN
    CREATE ROLE kfuse_fleet_writer NOLOGIN;
  END IF;
END
$$;

REVOKE ALL ON kfuse_fleet_meta, kfuse_blobs, kfuse_entries, kfuse_leases FROM PUBLIC;
GRANT SELECT ON kfuse_fleet_meta, kfuse_blobs, kfuse_entries TO kfuse_fleet_reader;
GRANT SELECT ON kfuse_fleet_meta TO kfuse_fleet_writer;
GRANT SELECT, INSERT ON kfuse_blobs, kfuse_entries TO kfuse_fleet_writer;
GRANT SELECT, INSERT, UPDATE, DELETE ON kfuse_leases TO kfuse_fleet_writer;
