package mysqlcdc

import (
	"context"
	"log/slog"
)

// libraryLogger wraps the user's logger for go-mysql's own messages, two levels lower (its
// errors at Info, its Info below Debug): it logs every connection at Info and every dropped
// connection at Error, and this package reports its failures itself, once, through Err.
func libraryLogger(l *slog.Logger) *slog.Logger {
	return slog.New(demoted{l.Handler()})
}

type demoted struct{ h slog.Handler }

func lower(l slog.Level) slog.Level { return l - 8 }

func (d demoted) Enabled(ctx context.Context, l slog.Level) bool { return d.h.Enabled(ctx, lower(l)) }

func (d demoted) Handle(ctx context.Context, r slog.Record) error {
	r.Level = lower(r.Level)
	return d.h.Handle(ctx, r)
}

func (d demoted) WithAttrs(as []slog.Attr) slog.Handler { return demoted{d.h.WithAttrs(as)} }
func (d demoted) WithGroup(name string) slog.Handler    { return demoted{d.h.WithGroup(name)} }
