"""The management commands of `xjobs_django`."""
