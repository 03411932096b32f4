"""Behaviour scenarios: execution, workers, steps, the relay and the scheduler, through the roles."""
