"""The xjobs benchmark: workloads W1–W8 of performance.md on xjobs, the peer libraries and the raw ceilings."""
