-- Login roles for kfuse nodes, members of the group roles fleet.sql creates:
-- kfuse_writer for tuning nodes, kfuse_reader for serving-only nodes.
-- Apply after fleet.sql, as a database owner, with both passwords in the
-- environment (read with \getenv: psql 15 or later), never on the command line:
--   KFUSE_WRITER_PASSWORD=... KFUSE_READER_PASSWORD=... \
--     psql -v ON_ERROR_STOP=1 -d kfuse -f roles.sql
-- Idempotent: creates the roles that are missing and sets both passwords
-- (run it again to rotate them).

\getenv writer_password KFUSE_WRITER_PASSWORD
\getenv reader_password KFUSE_READER_PASSWORD
\if :{?writer_password}
\else
  DO $$ BEGIN RAISE EXCEPTION 'roles.sql: KFUSE_WRITER_PASSWORD is not set'; END $$;
\endif
\if :{?reader_password}
\else
  DO $$ BEGIN RAISE EXCEPTION 'roles.sql: KFUSE_READER_PASSWORD is not set'; END $$;
\endif
SELECT length(:'writer_password') >= 16 AND length(:'reader_password') >= 16 AS passwords_ok \gset
\if :passwords_ok
\else
  DO $$ BEGIN RAISE EXCEPTION 'roles.sql: passwords must be at least 16 characters'; END $$;
\endif

SELECT 'CREATE ROLE kfuse_writer LOGIN IN ROLE kfuse_fleet_writer'
  WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'kfuse_writer') \gexec
SELECT 'CREATE ROLE kfuse_reader LOGIN IN ROLE kfuse_fleet_reader'
  WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'kfuse_reader') \gexec

ALTER ROLE kfuse_writer WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'writer_password';
ALTER ROLE kfuse_reader WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'reader_password';
GRANT kfuse_fleet_writer TO kfuse_writer;
GRANT kfuse_fleet_reader TO kfuse_reader;
-- A reader cannot write even where a grant slips through.
ALTER ROLE kfuse_reader SET default_transaction_read_only = on;
