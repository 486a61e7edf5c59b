#!/bin/bash
# Render definitions.json with the passwords from the environment, then start
# RabbitMQ through the image's own entrypoint (with no arguments: render only).
# Why: RabbitMQ reads users from a definitions file, and a file in the
# repository must not hold secrets.
set -euo pipefail

# Refuse the placeholders of .env.example: a deployment must not start with a password anyone can read.
for name in RABBITMQ_ADMIN_PASSWORD STREAMER_AMQP_PASSWORD LOGSTASH_AMQP_PASSWORD VIEWER_AMQP_PASSWORD \
        COLLECTOR_AMQP_PASSWORD; do
    if [[ ${!name:-} == change-me* ]]; then
        echo "render-definitions: $name is still the placeholder from deploy/.env.example (change-me-...); set a real password in deploy/.env" >&2
        exit 1
    fi
done

template=${DEFINITIONS_TEMPLATE:-/etc/rabbitmq/definitions.template.json}
target=${DEFINITIONS_TARGET:-/tmp/rabbitmq-definitions.json}
defs=$(<"$template")

for name in RABBITMQ_ADMIN_PASSWORD STREAMER_AMQP_PASSWORD LOGSTASH_AMQP_PASSWORD VIEWER_AMQP_PASSWORD \
        COLLECTOR_AMQP_PASSWORD; do
    value=${!name:-}
    if [[ -z $value ]]; then
        echo "render-definitions: $name is not set (see deploy/.env.example)" >&2
        exit 1
    fi
    if [[ $value == *'"'* || $value == *'\'* ]]; then
        echo "render-definitions: $name must not contain \" or \\" >&2
        exit 1
    fi
    placeholder="\${$name}"
    defs=${defs//"$placeholder"/"$value"}
done

umask 077
printf '%s\n' "$defs" >"$target"
# The image's entrypoint starts as root and drops to the rabbitmq user, who
# must be able to read the file.
if ((EUID == 0)) && id rabbitmq >/dev/null 2>&1; then
    chown rabbitmq "$target"
fi
# With no command (tests, dry runs) only render.
if (($# == 0)); then
    exit 0
fi
exec docker-entrypoint.sh "$@"
