#!/bin/bash
# Roles of the Stampede DB (run by the postgres image on first start, as the
# superuser, against $POSTGRES_DB; safe to run again):
#   $STREAMER_DB_USER - owns the database, so streamer can create the Stampede
#                       schema on first use and write to it
#   $GRAFANA_DB_USER  - reads every table streamer creates, writes nothing
# Names and passwords travel as psql variables (:"name", :'literal'), never
# pasted into SQL text.
set -euo pipefail

# Refuse the placeholders of .env.example: a deployment must not start with a password anyone can read.
for name in POSTGRES_PASSWORD STREAMER_DB_PASSWORD GRAFANA_DB_PASSWORD; do
    if [[ ${!name:-} == change-me* ]]; then
        echo "10-roles: $name is still the placeholder from deploy/.env.example (change-me-...); set a real password in deploy/.env" >&2
        exit 1
    fi
done

psql -v ON_ERROR_STOP=1 -X -q \
    --username "${POSTGRES_USER:-postgres}" --dbname "${POSTGRES_DB:?}" \
    -v db="$POSTGRES_DB" \
    -v writer="${STREAMER_DB_USER:-streamer}" -v writer_pw="${STREAMER_DB_PASSWORD:?}" \
    -v reader="${GRAFANA_DB_USER:-grafana_reader}" -v reader_pw="${GRAFANA_DB_PASSWORD:?}" <<'SQL'
SELECT format('CREATE ROLE %I LOGIN', :'writer')
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'writer') \gexec
SELECT format('CREATE ROLE %I LOGIN', :'reader')
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'reader') \gexec
ALTER ROLE :"writer" LOGIN PASSWORD :'writer_pw';
ALTER ROLE :"reader" LOGIN PASSWORD :'reader_pw';
ALTER ROLE :"reader" SET default_transaction_read_only = on;

ALTER DATABASE :"db" OWNER TO :"writer";
ALTER SCHEMA public OWNER TO :"writer";
REVOKE ALL ON DATABASE :"db" FROM PUBLIC;
GRANT CONNECT ON DATABASE :"db" TO :"reader";
GRANT USAGE ON SCHEMA public TO :"reader";
GRANT SELECT ON ALL TABLES IN SCHEMA public TO :"reader";
ALTER DEFAULT PRIVILEGES FOR ROLE :"writer" IN SCHEMA public GRANT SELECT ON TABLES TO :"reader";
SQL
echo "10-roles.sh: roles ${STREAMER_DB_USER:-streamer} and ${GRAFANA_DB_USER:-grafana_reader} ready"
