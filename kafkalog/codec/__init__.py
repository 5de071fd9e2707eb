"""Sans-IO codec for Kafka's record formats: bytes in, values out, and back."""
