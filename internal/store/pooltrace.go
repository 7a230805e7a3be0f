package store

import (
	"context"

	"petstore/internal/tracing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// poolTracer puts the wait for a pool connection of a sampled request in a
// span of its own (docs/observing.md, "Traces"), under the store call's:
// a pool exhausted shows there, apart from the query. pgx finds it on the
// connection's config (an AcquireTracer); the queries it passes on
// untouched, as their time is the store call's.
type poolTracer struct{}

func (poolTracer) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	ctx, _ = tracing.Child(ctx, "pool acquire")
	return ctx
}

func (poolTracer) TraceAcquireEnd(ctx context.Context, _ *pgxpool.Pool, data pgxpool.TraceAcquireEndData) {
	tracing.EndIn(ctx, data.Err)
}

func (poolTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (poolTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
