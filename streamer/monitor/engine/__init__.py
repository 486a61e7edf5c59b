"""The monitor's engine, one module per concern: `workflow` (DAGMan lines), `jobs`
(job-instance state machine), `outputs` and `invocations` (a finished job's files),
`static` (static.bp), `dagfile` (the .dag file), `state` (checkpoints), `events`
(typing), `context` (what they share). See docs/internals/architecture.md."""
