"""The broker harness of streamwire's integration tests (``integration/brokers.sh``)."""
