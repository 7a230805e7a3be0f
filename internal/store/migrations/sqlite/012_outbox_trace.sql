-- expand: a new nullable column; servers before it never read it (their events' deliveries are traced without a link)
-- The W3C trace context of what queued an event (a request, a worker's
-- scan), when it was traced: its traceparent, then a space and its
-- tracestate if it had one. Each attempt to deliver the event, however
-- much later and on whichever server, starts a span linked to it
-- (docs/observing.md, "Traces"). NULL: not traced, or queued by a server
-- before this column.
ALTER TABLE webhook_events ADD COLUMN trace_context TEXT;
