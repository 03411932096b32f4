"""The xjobs command line."""
