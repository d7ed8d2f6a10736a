"""Pipeline stages, one module each; registered in :data:`ctxcli.pipeline.STAGES`."""
