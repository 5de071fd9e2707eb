"""An independent reference model of Kafka's log cleaner, for differential tests of the product."""
