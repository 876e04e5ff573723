"""The reference broker: the Kafka wire protocol (through kio) in front of impl/share."""
