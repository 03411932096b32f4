"""The operator surface: see and steer jobs, queues, tasks and workers over `JobIntrospection`."""
