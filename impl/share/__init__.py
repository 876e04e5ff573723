"""Share groups for real: share-partition manager, share session cache, share coordinator with a durable log."""
