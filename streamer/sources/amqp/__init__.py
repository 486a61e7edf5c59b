"""AMQP sources: an exchange tailed (`tail`) and a queue or stream collected (`queue`)."""
