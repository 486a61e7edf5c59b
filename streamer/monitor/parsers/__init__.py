"""The monitor's file parsers: a submit directory's files -> values, no events.

`dagman` (dagman.out lines), `braindump`, `staticbp`, `submitfile` (.sub files),
`kickstart` with `kickstart_xml`, `yamlsub` (the kickstart YAML subset) and
`yamlguard` (bounded YAML nesting), `plaindag` (a plain DAG's `.dag` file),
`jobstate` (jobstate.log written and read).
"""
