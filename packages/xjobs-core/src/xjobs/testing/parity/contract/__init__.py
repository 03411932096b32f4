"""Contract scenarios: each driver and store operation, called directly."""
