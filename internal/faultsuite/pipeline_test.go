package faultsuite

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/mysqlcdc"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/sink"
	"github.com/tributary-dev/tributary/statestore"
)

// The pipeline under test, configured in the words of the mirror package's Config (one
// pipeline, its source, sink, state and dead-letter files, runner settings) and built by
// openPipeline alone, so that building it with mirror.Open changes that function only.

type sourceConfig struct {
	typ         string   // "postgres" or "mysql"
	dsn         string   // through the pipeline's proxy when the case has one
	tables      []string // schema.table (MySQL: db.table)
	slot        string   // PostgreSQL
	publication string   // PostgreSQL
	serverID    uint32   // MySQL: the replica id the reader registers with
}

type runnerConfig struct {
	batchMaxEvents          int
	batchMaxWait            time.Duration
	backpressureThreshold   time.Duration
	lagThreshold, lagPeriod time.Duration
}

type pipelineConfig struct {
	name   string
	source sourceConfig
	sink   sink.Config
	state  string // the bbolt state file
	dlq    string // the dead-letter file
	runner runnerConfig
}

// pipeline is what the suite needs of a running mirror.
type pipeline struct {
	run    func(ctx context.Context) error
	status func() cdc.Status
	// close releases files and clients once run returned; drop then removes what the pipeline
	// left on its source (PostgreSQL: slot and publication).
	close func()
	drop  func(ctx context.Context) error
}

// openPipeline builds the pipeline from the library's parts, as a user composing a mirror does.
func openPipeline(c *pipelineConfig, log *slog.Logger) (_ *pipeline, err error) {
	var closers []func() error
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			_ = closers[i]()
		}
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	state, err := statestore.Open(c.state, nil)
	if err != nil {
		return nil, err
	}
	closers = append(closers, state.Close)
	dlq, err := cdc.OpenFileDLQ(c.dlq, nil)
	if err != nil {
		return nil, err
	}
	closers = append(closers, dlq.Close)
	k, err := sink.New(c.sink, sink.Options{Pipeline: c.name, State: state})
	if err != nil {
		return nil, err
	}
	closers = append(closers, k.Close)

	var src cdc.Source
	drop := func(context.Context) error { return nil }
	srcLog := log.With("source", c.source.typ)
	switch c.source.typ {
	case "postgres":
		o := pgcdc.Options{Name: "postgres", Slot: c.source.slot, Publication: c.source.publication, Logger: srcLog}
		for _, t := range c.source.tables {
			schema, table, _ := strings.Cut(t, ".")
			o.Tables = append(o.Tables, pgcdc.Table{Schema: schema, Name: table})
		}
		s, err := pgcdc.New(c.source.dsn, o)
		if err != nil {
			return nil, err
		}
		src, drop = s, s.Drop
	case "mysql":
		m, err := testenv.ParseMySQLDSN(c.source.dsn)
		if err != nil {
			return nil, err
		}
		o := mysqlcdc.Options{SourceName: "mysql", ServerID: c.source.serverID, Logger: srcLog}
		for _, t := range c.source.tables {
			db, table, _ := strings.Cut(t, ".")
			o.Tables = append(o.Tables, mysqlcdc.TableName{Database: db, Table: table})
		}
		if src, err = mysqlcdc.New(m.Addr, m.User, m.Password, o); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("source type %q", c.source.typ)
	}
	r, err := cdc.NewRunner(src, k, state, dlq, &cdc.RunnerOptions{
		Pipeline:              c.name,
		BatchMaxEvents:        c.runner.batchMaxEvents,
		BatchMaxWait:          c.runner.batchMaxWait,
		BackpressureThreshold: c.runner.backpressureThreshold,
		LagThreshold:          c.runner.lagThreshold,
		LagInterval:           c.runner.lagPeriod,
		Logger:                log,
	})
	if err != nil {
		return nil, err
	}
	return &pipeline{
		run: func(ctx context.Context) error {
			err := r.Run(ctx)
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		},
		status: r.Status,
		close:  closeAll,
		drop:   drop,
	}, nil
}
