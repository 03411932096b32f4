"""One call builder per Lua script: its KEYS and ARGV from named arguments, in its header's order.

A builder is named as its script (`jobs.ack` builds `lua/ack.lua`'s call) and lives in its
family's module: `jobs` (enqueue, claim, the settles, the operator moves), `fleet` (the worker
registry and the concurrency slots), `events` (the step write and the event bus), `scheduler`
(watermarks, fires, the leader). No call site builds a script's KEYS or ARGV by hand.
"""
