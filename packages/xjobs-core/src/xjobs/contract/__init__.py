"""The contract: the driver and store protocols, the Backend bundle, and the plugin registry."""
