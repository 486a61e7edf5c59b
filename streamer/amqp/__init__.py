"""The AMQP client shared by the AMQP source and endpoint: connections and error kinds."""
