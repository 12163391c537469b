// Package pgnotify wakes outbox relays through PostgreSQL LISTEN/NOTIFY, so
// a relay in another process publishes a committed row at once instead of
// at its next poll. It is a separate package so that only its users import
// pgx.
//
// The application calls Notify inside each transaction that enqueued;
// PostgreSQL folds identical notifications of one transaction into one, so
// calling it after every Enqueue still sends one NOTIFY per transaction on
// the fixed channel Channel with an empty payload. A relay process runs
// Listen, which kicks the relay on every notification and on every
// (re)connect, since notifications sent while the listener was away are
// lost. The relay keeps polling in any case, so a lost notification delays
// a row by at most the relay's PollMax.
//
// Costs: a transaction that sent NOTIFY takes a global lock while it
// commits, so notifying commits are serialised across the whole server;
// above a few thousand notifying commits a second, rely on polling (a short
// PollMax) instead. The listener needs a session-level connection: not
// PgBouncer in transaction-pooling mode.
package pgnotify

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgxlisten"

	"github.com/kawa-broker/kawa/outbox"
)

// Channel is the notification channel of every Kawa outbox.
const Channel = "kawa_outbox"

// ApplicationName is the application_name of the listener's connection
// (visible in pg_stat_activity).
const ApplicationName = "kawa-outbox-pgnotify"

// Notify queues the outbox notification in tx; PostgreSQL delivers it when
// tx commits and drops it if tx rolls back. It returns the database's
// error.
func Notify(ctx context.Context, tx outbox.Tx) error {
	_, err := tx.ExecContext(ctx, `SELECT pg_notify('`+Channel+`', '')`)
	return err
}

// Kicker is what Listen wakes; *outbox.Relay satisfies it.
type Kicker interface{ Notify() }

// Config configures Listen.
type Config struct {
	// ConnString is a pgx connection string or URL (postgres://...).
	// Required.
	ConnString string
	// ReconnectDelay is the wait before reconnecting after the connection
	// failed. Default 1s.
	ReconnectDelay time.Duration
	// OnError is called with each connection or listen error (Listen
	// retries them). Optional.
	OnError func(error)
}

// Listen listens on Channel and calls k.Notify for each notification and
// after each (re)connect, until ctx is done; it then returns ctx's error.
// It returns early only for a bad Config.
func Listen(ctx context.Context, cfg Config, k Kicker) error {
	if cfg.ConnString == "" {
		return errors.New("pgnotify: Config.ConnString is empty")
	}
	cc, err := pgx.ParseConfig(cfg.ConnString)
	if err != nil {
		return err
	}
	cc.RuntimeParams["application_name"] = ApplicationName
	if cfg.ReconnectDelay <= 0 {
		cfg.ReconnectDelay = time.Second
	}
	l := &pgxlisten.Listener{
		Connect:        func(ctx context.Context) (*pgx.Conn, error) { return pgx.ConnectConfig(ctx, cc) },
		ReconnectDelay: cfg.ReconnectDelay,
		LogError: func(_ context.Context, err error) {
			if cfg.OnError != nil {
				cfg.OnError(err)
			}
		},
	}
	l.Handle(Channel, kick{k})
	return l.Listen(ctx)
}

// kick wakes the relay on a notification and on every (re)connect (the
// backlog hook, called once LISTEN is in place).
type kick struct{ k Kicker }

func (h kick) HandleNotification(context.Context, *pgconn.Notification, *pgx.Conn) error {
	h.k.Notify()
	return nil
}

func (h kick) HandleBacklog(context.Context, string, *pgx.Conn) error {
	h.k.Notify()
	return nil
}
