package webhook_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"petstore/internal/servertest"
	"strings"
	"sync"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/limits"
	"petstore/internal/manage"
	"petstore/internal/testkit"
	"petstore/internal/webhook"

	"github.com/jackc/pgx/v5"
)

// The outbox's upkeep: how deliveries are claimed (a slow endpoint holds
// a few places, across servers too) and what the hourly prune forgets.

// TestWebhookAClaimOfADeadServerExpires: a server that claimed an attempt
// and died leaves it to the others once its claim has expired, not before.
func TestWebhookAClaimOfADeadServerExpires(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		s := servertest.Start(t, opts.WithWebhooks())
		rc := testkit.NewReceiver(t)
		e := s.AddEndpoint(rc)
		ev, err := manage.QueueTest(context.Background(), s.Store(), s.Env, e.ID, servertest.Actor, s.Clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		claimed, err := s.Store().ClaimWebhookDeliveries(context.Background(), s.Env, s.Clock.Now(), webhook.ClaimFor, nil, 10,
			func(int64) bool { return true })
		if err != nil || len(claimed) != 1 || claimed[0].EventID != ev.ID {
			t.Fatalf("claim: %+v, %v", claimed, err)
		}
		s.DeliverDue()
		if n := len(rc.Deliveries()); n != 0 {
			t.Fatalf("a claimed delivery was sent by another: %d", n)
		}
		s.Clock.Advance(webhook.ClaimFor)
		s.DeliverDue()
		if got := rc.Wait(1, 5*time.Second); got[0].ID != ev.ID || !got[0].Verified {
			t.Fatalf("after the claim expired: %+v", got)
		}
	})
}

// TestWebhookAHangingReceiverHoldsAFewAttempts: a receiver that does not
// answer holds maxInFlightPerEndpoint attempts of a server, while the other
// endpoints' deliveries and the requests go on.
func TestWebhookAHangingReceiverHoldsAFewAttempts(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{WebhookAllowPrivate: true})
	hanging, fine := testkit.NewReceiver(t), testkit.NewReceiver(t)
	release := make(chan struct{})
	hanging.AnswerWith(func(int, testkit.Delivery) int { <-release; return http.StatusOK })
	defer close(release)
	h := s.AddEndpoint(hanging)
	f := s.AddEndpoint(fine)
	for range 10 {
		if _, err := manage.QueueTest(context.Background(), s.Store(), s.Env, h.ID, servertest.Actor, s.Clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := manage.QueueTest(context.Background(), s.Store(), s.Env, f.ID, servertest.Actor, s.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var attempts sync.WaitGroup
	defer func() { cancel(); attempts.Wait() }()
	for range 3 {
		s.Webhooks().Dispatch(ctx, &attempts)
	}
	fine.Wait(1, 5*time.Second)
	testkit.Eventually(t, 5*time.Second, "the hanging receiver holds its attempts", func() bool {
		return len(hanging.Deliveries()) == domain.MaxInFlightPerEndpoint
	})
	time.Sleep(50 * time.Millisecond)
	if n := len(hanging.Deliveries()); n != domain.MaxInFlightPerEndpoint {
		t.Fatalf("%d attempts in flight to one endpoint, want %d", n, domain.MaxInFlightPerEndpoint)
	}
	key := s.MustCreateKey("free")
	if w := s.Do("GET", "/v1/pets", key, ""); w.Code != http.StatusOK {
		t.Fatalf("a request while a receiver hangs: %d", w.Code)
	}
}

func TestWebhookPruneForgetsWhatIsOver(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		s := servertest.Start(t, opts.WithWebhooks())
		rc := testkit.NewReceiver(t)
		e := s.AddEndpoint(rc)
		ctx := context.Background()
		if _, err := manage.QueueTest(ctx, s.Store(), s.Env, e.ID, servertest.Actor, s.Clock.Now()); err != nil {
			t.Fatal(err)
		}
		notice := func() domain.WebhookNotice {
			n, err := limits.QuotaNotice{BudgetID: 1, KeyID: 1, Env: s.Env, Threshold: 80, Used: 8, Limit: 10, Day: "2026-03-10", At: s.Clock.Now()}.Notice()
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		if err := s.Store().AddWebhookNotices(ctx, []domain.WebhookNotice{notice()}); err != nil {
			t.Fatal(err)
		}
		s.DeliverDue()
		rc.Wait(2, 5*time.Second)
		waiting, _ := manage.QueueTest(ctx, s.Store(), s.Env, e.ID, servertest.Actor, s.Clock.Now())
		s.Clock.Advance(31 * 24 * time.Hour)
		if err := s.Store().PruneWebhooks(ctx, s.Clock.Now()); err != nil {
			t.Fatal(err)
		}
		left, err := s.Store().WebhookDeliveries(ctx, domain.DeliveryFilter{})
		if err != nil || len(left) != 1 || left[0].EventID != waiting.ID {
			t.Fatalf("after the prune: %+v, %v; want only the waiting delivery", left, err)
		}
		// The day's mark is gone with its day.
		if err := s.Store().AddWebhookNotices(ctx, []domain.WebhookNotice{notice()}); err != nil {
			t.Fatal(err)
		}
		if n, _, _ := s.Store().WebhookBacklog(ctx, s.Env); n != 2 {
			t.Fatalf("backlog %d, want the waiting test and the notice again", n)
		}
	})
}

// TestWebhookSlowEndpointsLeavePlacesForTheOthers: four receivers that
// hang hold some of a server's places, never all: a delivery to a fast
// one queued after them goes out at once.
func TestWebhookSlowEndpointsLeavePlacesForTheOthers(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{WebhookAllowPrivate: true})
	release := make(chan struct{})
	defer close(release)
	var hanging []*testkit.Receiver
	for range 4 {
		rc := testkit.NewReceiver(t)
		rc.AnswerWith(func(int, testkit.Delivery) int { <-release; return http.StatusOK })
		e := s.AddEndpoint(rc)
		for range 2 * domain.MaxInFlightPerEndpoint {
			if _, err := manage.QueueTest(context.Background(), s.Store(), s.Env, e.ID, servertest.Actor, s.Clock.Now()); err != nil {
				t.Fatal(err)
			}
		}
		hanging = append(hanging, rc)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	defer func() { cancel(); <-done }()
	go func() { s.Webhooks().Run(ctx); close(done) }()
	held := func() (n int) {
		for _, rc := range hanging {
			n += len(rc.Deliveries())
		}
		return n
	}
	testkit.Eventually(t, 5*time.Second, "the hanging receivers hold their attempts", func() bool {
		return held() >= webhook.PlacesForOthers
	})
	time.Sleep(1500 * time.Millisecond) // a poll more: they take no more
	if n := held(); n >= webhook.AttemptsAtOnce {
		t.Fatalf("the hanging receivers hold %d attempts: every place", n)
	}

	fast := testkit.NewReceiver(t)
	e := s.AddEndpoint(fast)
	if _, err := manage.QueueTest(context.Background(), s.Store(), s.Env, e.ID, servertest.Actor, s.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	s.Webhooks().Poke()
	fast.Wait(1, 3*time.Second)
}

// TestWebhookTwoServersKeepTheCapOfOneEndpoint: the cap of attempts at
// once to one endpoint holds for all the servers on one PostgreSQL
// together, through the claim.
func TestWebhookTwoServersKeepTheCapOfOneEndpoint(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{WebhookAllowPrivate: true, Postgres: true})
	servers := []*servertest.Server{s, s.AnotherServer()}
	slow := testkit.NewReceiver(t)
	var mu sync.Mutex
	var now, most int
	slow.AnswerWith(func(int, testkit.Delivery) int {
		mu.Lock()
		now++
		most = max(most, now)
		mu.Unlock()
		time.Sleep(300 * time.Millisecond)
		mu.Lock()
		now--
		mu.Unlock()
		return http.StatusNoContent
	})
	e := s.AddEndpoint(slow)
	const events = 3 * domain.MaxInFlightPerEndpoint
	for range events {
		if _, err := manage.QueueTest(context.Background(), s.Store(), s.Env, e.ID, servertest.Actor, s.Clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var running sync.WaitGroup
	defer func() { cancel(); running.Wait() }()
	for _, srv := range servers {
		running.Go(func() { srv.Webhooks().Run(ctx) })
	}
	slow.Wait(events, 20*time.Second)
	mu.Lock()
	m := most
	mu.Unlock()
	if m > domain.MaxInFlightPerEndpoint || m < 2 {
		t.Fatalf("two servers made %d attempts at once to one endpoint, want at most %d", m, domain.MaxInFlightPerEndpoint)
	}
	if got := slow.Deliveries(); len(got) != events {
		t.Fatalf("%d deliveries of %d events: one was sent twice", len(got), events)
	}
}

// TestWebhookPruneForgetsExpiryMarksAfterTheKeysExpiry: the marks of a
// key's expiry notices are kept while a server could make them again, then
// the hourly prune forgets them by their index; the key is not announced
// again.
func TestWebhookPruneForgetsExpiryMarksAfterTheKeysExpiry(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		s := servertest.Start(t, opts.WithWebhooks())
		rc := testkit.NewReceiver(t)
		s.AddEndpoint(rc, domain.WebhookKeyExpiring, domain.WebhookKeyExpired)
		terms := s.KeyTerms("pro")
		terms.ExpiresAt = s.Clock.Now().Add(3 * 24 * time.Hour)
		s.MustCreate(terms)
		ctx := context.Background()
		step := func(advance time.Duration) []string {
			t.Helper()
			s.Clock.Advance(advance)
			s.Webhooks().NoticeExpiries(ctx)
			if err := s.Store().PruneWebhooks(ctx, s.Clock.Now()); err != nil {
				t.Fatal(err)
			}
			return noticeMarks(s)
		}
		if marks := step(2*24*time.Hour + time.Hour); len(marks) != 1 || !strings.HasPrefix(marks[0], "expiring:") {
			t.Fatalf("a day before the expiry: marks %q", marks)
		}
		if marks := step(24 * time.Hour); len(marks) != 2 {
			t.Fatalf("after the expiry: marks %q, want expiring and expired", marks)
		}
		// key.expired could be sent until staleExpiry after the expiry: the
		// marks stay until a day after that.
		if marks := step(domain.StaleExpiry + 23*time.Hour); len(marks) != 2 {
			t.Fatalf("%s after the expiry: marks %q, want both kept", domain.StaleExpiry+23*time.Hour, marks)
		}
		if marks := step(2 * time.Hour); len(marks) != 0 {
			t.Fatalf("%s after the expiry: marks %q, want none", domain.KeepExpiryMarks+time.Hour, marks)
		}
		s.DeliverDue()
		if got := rc.Wait(2, 5*time.Second); len(got) != 2 {
			t.Fatalf("the key was announced %d times, want twice: %+v", len(got), got)
		}
		if plan := queryPlan(s, `SELECT mark FROM webhook_notices WHERE forget_at < 5`); !strings.Contains(plan, "webhook_notices_forget") {
			t.Errorf("the prune's look-up does not use the index: %s", plan)
		}
	})
}

// noticeMarks are the marks of notices stored, in order.
func noticeMarks(s *servertest.Server) []string {
	return lastColumn(s, `SELECT mark FROM webhook_notices ORDER BY mark`)
}

// queryPlan is the engine's plan of query, as it would run it on a table
// of any size (PostgreSQL is told to avoid a sequential scan, which it
// prefers on a table of a few rows).
func queryPlan(s *servertest.Server, query string) string {
	if s.PG != nil {
		return strings.Join(lastColumn(s, `EXPLAIN `+query, `SET LOCAL enable_seqscan = off`), "\n")
	}
	return strings.Join(lastColumn(s, `EXPLAIN QUERY PLAN `+query), "\n")
}

// lastColumn is the last column of each row query gives, as text, read in
// one transaction of the test server's database after the setup statements.
func lastColumn(s *servertest.Server, query string, setup ...string) []string {
	s.T.Helper()
	ctx := context.Background()
	var col []string
	var err error
	if s.PG != nil {
		err = pgx.BeginFunc(ctx, s.PG.Pool(), func(tx pgx.Tx) error {
			for _, q := range setup {
				if _, err := tx.Exec(ctx, q); err != nil {
					return err
				}
			}
			rows, _ := tx.Query(ctx, query)
			col, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
				values, err := row.Values()
				return fmt.Sprint(values[len(values)-1]), err
			})
			return err
		})
	} else {
		col, err = sqliteLastColumn(s.SQLite.Writer(), query)
	}
	if err != nil {
		s.T.Fatal(err)
	}
	return col
}

func sqliteLastColumn(db *sql.DB, query string) ([]string, error) {
	rows, err := db.Query(query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	names, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var col []string
	for rows.Next() {
		values := make([]any, len(names))
		for i := range values {
			values[i] = new(any)
		}
		if err := rows.Scan(values...); err != nil {
			return nil, err
		}
		col = append(col, fmt.Sprint(*values[len(values)-1].(*any)))
	}
	return col, rows.Err()
}
