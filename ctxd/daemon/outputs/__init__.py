"""Where ctxd's figures go besides a hook's answer, each fed by the status rows.

An output reads the status document (`Status.document`, what `ctxd status --json` prints) and
never reaches into sessions or transcripts. Pulled outputs (`ctxd status`, `/metrics`) render
it when asked; a pushed one does its I/O off the event loop with a bounded hand-over, so a slow
or absent receiver costs a hook nothing:

- `otlp`: OpenTelemetry metrics over OTLP/HTTP (`otlp_settings` resolves the `OTEL_*`
  variables with the `[otlp]` table).
"""
