"""The AMQP endpoint (monitord's exchange form) and its publishing channel."""
