"""`manage.py xjobs_worker` and `manage.py xjobs_install`."""
