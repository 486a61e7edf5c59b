#!/bin/bash
# Create the least-privilege Elasticsearch roles and users of the pipeline:
#   logstash_writer - installs the pegasus-* index templates, writes pegasus-*
#   grafana_reader  - reads pegasus-*
# Run once by the `elasticsearch-setup` service; safe to run again (the
# security API's PUT replaces a role or user, so passwords follow .env).
set -euo pipefail

# Refuse the placeholders of .env.example: a deployment must not start with a password anyone can read.
for name in ELASTIC_PASSWORD LOGSTASH_ES_PASSWORD GRAFANA_ES_PASSWORD; do
    if [[ ${!name:-} == change-me* ]]; then
        echo "setup-users: $name is still the placeholder from deploy/.env.example (change-me-...); set a real password in deploy/.env" >&2
        exit 1
    fi
done

es=${ELASTICSEARCH_URL:-http://elasticsearch:9200}

put() {  # put PATH JSON: PUT as the elastic superuser, fail on any error
    local path=$1 body=$2
    curl -fsS -u "elastic:${ELASTIC_PASSWORD}" -X PUT "$es$path" \
        -H 'Content-Type: application/json' --data-binary @- <<<"$body" >/dev/null
    echo "setup-users: PUT $path"
}

json_string() {  # a shell value as a JSON string (passwords may hold any character but " and \)
    printf '"%s"' "$1"
}

put /_security/role/pegasus_writer '{
  "cluster": ["monitor", "manage_index_templates"],
  "indices": [{"names": ["pegasus-*"], "privileges": ["create_index", "create_doc", "index", "write", "view_index_metadata"]}]
}'
put /_security/role/pegasus_reader '{
  "cluster": ["monitor"],
  "indices": [{"names": ["pegasus-*"], "privileges": ["read", "view_index_metadata"]}]
}'
put "/_security/user/${LOGSTASH_ES_USER:-logstash_writer}" "{
  \"password\": $(json_string "$LOGSTASH_ES_PASSWORD"),
  \"roles\": [\"pegasus_writer\"],
  \"full_name\": \"Logstash (streamer pipeline)\"
}"
put "/_security/user/${GRAFANA_ES_USER:-grafana_reader}" "{
  \"password\": $(json_string "$GRAFANA_ES_PASSWORD"),
  \"roles\": [\"pegasus_reader\"],
  \"full_name\": \"Grafana (streamer pipeline)\"
}"
echo "setup-users: done"
