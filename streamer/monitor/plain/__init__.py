"""Plain DAGMan without Pegasus: its own jobstate.log and dagman.out as event sources."""
