"""Generated protobuf code for liftbridge-api v1.9.0 (see PROVENANCE.md). Do not edit."""
