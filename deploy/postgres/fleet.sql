-- The kfuse fleet store: the second tier behind each node's SQLite store.
-- Apply once as a database owner (psql -v ON_ERROR_STOP=1 -d kfuse -f fleet.sql),
-- then give nodes the login roles below: tuning nodes log in as members of
-- kfuse_fleet_writer, serving-only nodes as members of kfuse_fleet_reader.
-- Idempotent: safe to apply again, and applied to a schema-1 database it
-- migrates it to schema 2. Upgrade every node first: a kfused from before
-- schema 2 fails its publishes on a schema-2 database, and refuses it at its
-- next connection (serving from its own store until it is upgraded).

CREATE TABLE IF NOT EXISTS kfuse_fleet_meta (
  schema_version integer NOT NULL
);
INSERT INTO kfuse_fleet_meta (schema_version)
  SELECT 2 WHERE NOT EXISTS (SELECT 1 FROM kfuse_fleet_meta);

-- Content-addressed payloads (kfuse.storage.v1.Decision or Artifact). The
-- database checks the address, so no writer can file bytes under the hash
-- of an entry another node will publish.
CREATE TABLE IF NOT EXISTS kfuse_blobs (
  sha256 text PRIMARY KEY CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  bytes  bigint NOT NULL,
  data   bytea NOT NULL,
  CONSTRAINT kfuse_blobs_sha256_matches CHECK (sha256 = encode(sha256(data), 'hex'))
);

-- One row per published entry and signer; never updated (ON CONFLICT DO
-- NOTHING). Nodes read only the rows of signers they trust, so a row by a
-- signer others do not trust (another trust domain, a key taken out of
-- service) never stands in the place of theirs.
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
  PRIMARY KEY (kind, key, signer)
);
CREATE INDEX IF NOT EXISTS kfuse_entries_chain ON kfuse_entries (chain);

-- One tuning lease per key, so N nodes missing the same key tune it once.
CREATE TABLE IF NOT EXISTS kfuse_leases (
  key        text PRIMARY KEY,
  holder     text NOT NULL,
  expires_at timestamptz NOT NULL
);

-- Schema 1 -> 2, in two steps. The first is quick, under exclusive locks
-- (taken entries first, as nodes' reads and publishes take them, so no
-- deadlock with them): the signer joins the entries' key and the blob check
-- is added for new rows.
DO $$
DECLARE
  pkey name;
BEGIN
  -- FOR UPDATE: a second psql applying this at once waits, then sees 2.
  IF (SELECT schema_version FROM kfuse_fleet_meta FOR UPDATE) = 1 THEN
    LOCK TABLE kfuse_entries, kfuse_blobs IN ACCESS EXCLUSIVE MODE;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = 'kfuse_blobs'::regclass
                   AND conname = 'kfuse_blobs_sha256_matches') THEN
      ALTER TABLE kfuse_blobs ADD CONSTRAINT kfuse_blobs_sha256_matches
        CHECK (sha256 = encode(sha256(data), 'hex')) NOT VALID;
    END IF;
    SELECT conname INTO pkey FROM pg_constraint WHERE conrelid = 'kfuse_entries'::regclass AND contype = 'p';
    IF pkey IS NOT NULL THEN
      EXECUTE format('ALTER TABLE kfuse_entries DROP CONSTRAINT %I', pkey);
    END IF;
    ALTER TABLE kfuse_entries ADD PRIMARY KEY (kind, key, signer);
    UPDATE kfuse_fleet_meta SET schema_version = 2;
  END IF;
END
$$;

-- The second checks the blobs written before the check, under locks that
-- let nodes read and publish meanwhile: a blob whose bytes do not hash to
-- its address (written by hand, or by a writer without a trusted key) goes,
-- with the entries on it (no node would use them). The bad blobs are found
-- and locked in one statement (each rechecked once locked), so no entry can
-- be filed on one while they go. Skipped once the check is valid; the meta
-- row's lock makes a second psql applying this at once wait, then skip.
DO $$
DECLARE
  bad text[];
BEGIN
  PERFORM 1 FROM kfuse_fleet_meta FOR UPDATE;
  IF EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = 'kfuse_blobs'::regclass
             AND conname = 'kfuse_blobs_sha256_matches' AND NOT convalidated) THEN
    SELECT coalesce(array_agg(sha256), '{}') INTO bad FROM
      (SELECT sha256 FROM kfuse_blobs WHERE sha256 <> encode(sha256(data), 'hex') FOR UPDATE) AS mismatched;
    DELETE FROM kfuse_entries WHERE blob_sha256 = ANY(bad);
    DELETE FROM kfuse_blobs WHERE sha256 = ANY(bad);
    ALTER TABLE kfuse_blobs VALIDATE CONSTRAINT kfuse_blobs_sha256_matches;
  END IF;
END
$$;

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
